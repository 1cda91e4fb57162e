//! Several locks taken and released as one, with Redisson's semantics:
//!
//! - [`MultiLock`] (`RedissonMultiLock`): every lock, of any kind (reentrant, fair, either side
//!   of a read-write lock, spin), from the same client or from different clients and servers;
//! - [`RedLock`] (`RedissonRedLock`): the same over independent primaries, held once a quorum
//!   (`n / 2 + 1`) of them is, for a validity shortened by the time spent acquiring.
//!
//! ```no_run
//! # async fn demo(a: ferrisson_multilock::Client, b: ferrisson_multilock::Client) -> ferrisson_multilock::Result<()> {
//! use ferrisson_lock::ReentrantLock;
//! use ferrisson_multilock::MultiLock;
//!
//! let transfer = MultiLock::new(vec![
//!     Box::new(ReentrantLock::new(&a, "account:1")?),
//!     Box::new(ReentrantLock::new(&b, "account:2")?),
//! ])?;
//! let guard = transfer.lock().await?;
//! // ... both accounts are ours ...
//! guard.unlock().await?;
//! # Ok(()) }
//! ```

mod multi;

pub use ferrisson_core::{AcquireOptions, Lock};
// What a user of this crate alone needs, without a dependency on `ferrisson-core`.
pub use ferrisson_core::{Client, ClientConfig, Error, Hold, LossReason, Owner, Result};
pub use multi::{AnyLock, LockGroup, MultiGuard, MultiLock, RedLock};
