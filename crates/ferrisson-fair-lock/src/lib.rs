//! A fair (FIFO) distributed lock on Redis with Redisson's `RFairLock` semantics and data
//! layout: waiters of every client take it in the order they queued, dead waiters are dropped
//! within seconds, and holds carry the same loss signal and fencing tokens as the reentrant
//! lock.
//!
//! ```no_run
//! # async fn demo() -> ferrisson_fair_lock::Result<()> {
//! use ferrisson_fair_lock::Client;
//! use ferrisson_fair_lock::{FairLock, Lock};
//!
//! let client = Client::connect("redis://127.0.0.1:6379").await?;
//! let lock = FairLock::new(&client, "settlement")?;
//! let guard = lock.lock().await?;
//! // ... the protected work, watching guard.lost() ...
//! guard.unlock().await?;
//! # Ok(()) }
//! ```
//!
//! See [`FairLock`] for the semantics and [`docs/guarantees.md`](https://github.com/ferrisson/ferrisson/blob/main/docs/guarantees.md) for what Redis cannot promise.

mod fair;
mod inspect;
mod non_reentrant;
mod scripts;

pub use fair::{DEFAULT_WAITER_TIMEOUT, FairLock, REDISSON_THREAD_WAIT};
pub use ferrisson_core::{AcquireOptions, HoldGuard, Lock, SyncObject};
pub use non_reentrant::NonReentrantFairLock;
// What a user of this crate alone needs, without a dependency on `ferrisson-core`.
pub use ferrisson_core::{Client, ClientConfig, Error, Hold, LossReason, Owner, Result};
pub use scripts::scripts;
