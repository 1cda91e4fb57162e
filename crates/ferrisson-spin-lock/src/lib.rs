//! A spin lock on Redis with Redisson's `RSpinLock` semantics and data layout: the reentrant
//! lock's hash, leases, watchdog, loss signal and fencing option, but no pub/sub. Releases
//! publish nothing and waiters poll with exponential backoff (1 ms to 128 ms by default), so
//! that it runs where pub/sub is unwanted or unavailable, at the cost of a few commands per
//! wait.
//!
//! ```no_run
//! # async fn demo() -> ferrisson_spin_lock::Result<()> {
//! use ferrisson_spin_lock::Client;
//! use ferrisson_spin_lock::{Lock, SpinLock};
//!
//! let client = Client::connect("redis://127.0.0.1:6379").await?;
//! let lock = SpinLock::new(&client, "cache:refresh")?;
//! let guard = lock.lock().await?;
//! // ... the protected work, watching guard.lost() ...
//! guard.unlock().await?;
//! # Ok(()) }
//! ```

mod inspect;
mod spin;

pub use ferrisson_core::Backoff;
pub use ferrisson_core::{AcquireOptions, HoldGuard, Lock, SyncObject};
// What a user of this crate alone needs, without a dependency on `ferrisson-core`.
pub use ferrisson_core::{Client, ClientConfig, Error, LossReason, Owner, Result};
pub use spin::{DEFAULT_BACKOFF, SpinLock};

#[doc(hidden)]
/// Every script this crate runs (its acquire and inspection, and `ferrisson_core`'s hash-lock
/// release).
pub fn scripts() -> [&'static ferrisson_core::__engine::Script; 3] {
    [
        &spin::ACQUIRE,
        &inspect::INSPECT,
        &ferrisson_core::__engine::HASH_LOCK_RELEASE,
    ]
}
