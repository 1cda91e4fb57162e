//! A distributed semaphore on Redis with Redisson's `RSemaphore` semantics and data layout:
//! at most N holders of a resource across every instance of a service.
//!
//! ```no_run
//! # async fn demo() -> ferrisson_semaphore::Result<()> {
//! use ferrisson_semaphore::Client;
//! use ferrisson_semaphore::Semaphore;
//!
//! let client = Client::connect("redis://127.0.0.1:6379").await?;
//! let limit = Semaphore::new(&client, "partner-api")?;
//! limit.try_set_permits(20).await?; // the first instance to start sets the limit
//! let permit = limit.acquire().await?; // waits while 20 calls are in flight
//! // ... call the partner API ...
//! permit.release().await?;
//! # Ok(()) }
//! ```
//!
//! Permits of a plain semaphore belong to nobody: a process that dies holding some does not
//! give them back. For permits that come back by themselves, use the permit-expirable
//! semaphore.

mod scripts;
mod semaphore;

pub use ferrisson_core::{AcquireOptions, SyncObject};
// What a user of this crate alone needs, without a dependency on `ferrisson-core`.
pub use ferrisson_core::{Client, ClientConfig, Error, Hold, LossReason, Owner, Result};
pub use scripts::scripts;
pub use semaphore::{Permits, Semaphore};
