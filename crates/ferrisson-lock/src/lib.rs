//! A reentrant distributed lock on Redis with Redisson's semantics and data layout, a lease
//! watchdog whose failures are never silent, and fencing tokens; and [`Mutex`]
//! (**\[ext\]**), a lean non-reentrant lock on the standard Redlock layout.
//!
//! ```no_run
//! # async fn demo() -> ferrisson_lock::Result<()> {
//! use ferrisson_lock::Client;
//! use ferrisson_lock::{Lock, ReentrantLock};
//!
//! let client = Client::connect("redis://127.0.0.1:6379").await?;
//! let lock = ReentrantLock::new(&client, "invoices:2026-11")?;
//! let guard = lock.lock().await?;
//! tokio::select! {
//!     reason = guard.lost() => eprintln!("lock lost ({reason}): stop, another holder may run"),
//!     () = async { /* the protected work */ } => {}
//! }
//! guard.unlock().await?;
//! # Ok(()) }
//! ```
//!
//! See [`ReentrantLock`] for the semantics and [`docs/guarantees.md`](https://github.com/ferrisson/ferrisson/blob/main/docs/guarantees.md) for what Redis cannot
//! promise (failover, pauses) and what to do about it.

mod fenced;
mod inspect;
mod lock;
mod mutex;
mod non_reentrant;
mod scripts;

pub use fenced::{Fenced, FencedGuard, FencedHold, FencedLock, FencedMutex};
pub use ferrisson_core::{AcquireOptions, HoldGuard, Lock, SyncObject};
// What a user of this crate alone needs, without a dependency on `ferrisson-core`.
pub use ferrisson_core::{Client, ClientConfig, Error, Hold, LossReason, Owner, Result};
pub use lock::ReentrantLock;
pub use mutex::{FOREIGN_RELEASE_RECHECK, Mutex};
pub use non_reentrant::NonReentrantLock;
pub use scripts::scripts;
