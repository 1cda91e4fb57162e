//! A permit-expirable distributed semaphore on Redis with Redisson's
//! `RPermitExpirableSemaphore` semantics and data layout: every permit has an id and a lease,
//! and the permits of a holder that died come back by themselves.
//!
//! ```no_run
//! # async fn demo() -> ferrisson_expirable_semaphore::Result<()> {
//! use ferrisson_expirable_semaphore::Client;
//! use ferrisson_expirable_semaphore::ExpirableSemaphore;
//!
//! let client = Client::connect("redis://127.0.0.1:6379").await?;
//! let limit = ExpirableSemaphore::new(&client, "partner-api")?;
//! limit.try_set_permits(20).await?;
//! // No fixed lease: the client's watchdog keeps the permit while this process lives.
//! let permit = limit.acquire().await?;
//! tokio::select! {
//!     reason = permit.lost() => eprintln!("permit lost ({reason}): stop calling"),
//!     () = async { /* call the partner API */ } => {}
//! }
//! permit.release().await?;
//! # Ok(()) }
//! ```

mod inspect;
mod scripts;
mod semaphore;

pub use ferrisson_core::{AcquireOptions, SyncObject};
// What a user of this crate alone needs, without a dependency on `ferrisson-core`.
pub use ferrisson_core::{Client, ClientConfig, Error, Hold, LossReason, Owner, Result};
pub use scripts::scripts;
pub use semaphore::{ExpirableSemaphore, Permit};
