//! A read-write distributed lock on Redis with Redisson's `RReadWriteLock` semantics and data
//! layout: many readers or one writer, both reentrant, downgrade but no upgrade, a lease key
//! per read hold so that a crashed reader's holds expire on their own, and the loss signal on
//! every hold (fencing tokens on the write side).
//!
//! ```no_run
//! # async fn demo() -> ferrisson_rwlock::Result<()> {
//! use ferrisson_rwlock::Client;
//! use ferrisson_rwlock::{Lock, ReadWriteLock};
//!
//! let client = Client::connect("redis://127.0.0.1:6379").await?;
//! let lock = ReadWriteLock::new(&client, "prices")?;
//! let read = lock.read_lock().lock().await?; // shared with other readers
//! read.unlock().await?;
//! let write = lock.write_lock().lock().await?; // exclusive
//! write.unlock().await?;
//! # Ok(()) }
//! ```
//!
//! See [`ReadWriteLock`] for the semantics and [`docs/guarantees.md`](https://github.com/ferrisson/ferrisson/blob/main/docs/guarantees.md) for what Redis cannot
//! promise.

mod inspect;
mod rwlock;
mod scripts;

pub use ferrisson_core::{AcquireOptions, HoldGuard, Lock, SyncObject};
// What a user of this crate alone needs, without a dependency on `ferrisson-core`.
pub use ferrisson_core::{Client, ClientConfig, Error, Hold, LossReason, Owner, Result};
pub use rwlock::{Mode, ReadLock, ReadWriteLock, SideLock, WriteLock};
pub use scripts::scripts;
