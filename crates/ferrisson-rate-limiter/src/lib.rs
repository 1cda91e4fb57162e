//! A rate limiter on Redis with Redisson's `RRateLimiter` semantics and data layout: `rate`
//! permits per `interval`, for all clients together or for each client, in a sliding window.
//!
//! ```no_run
//! # async fn demo() -> ferrisson_rate_limiter::Result<()> {
//! use std::time::Duration;
//! use ferrisson_rate_limiter::Client;
//! use ferrisson_rate_limiter::{RateLimiter, RateType};
//!
//! let client = Client::connect("redis://127.0.0.1:6379").await?;
//! let limiter = RateLimiter::new(&client, "api:geocoder")?;
//! limiter.try_set_rate(RateType::Overall, 10, Duration::from_secs(1)).await?;
//! limiter.acquire(1).await?; // at most 10 calls per second, across every instance
//! # Ok(()) }
//! ```

mod inspect;
mod limiter;

pub use ferrisson_core::{AcquireOptions, SyncObject};
// What a user of this crate alone needs, without a dependency on `ferrisson-core`.
pub use ferrisson_core::{Client, ClientConfig, Error, LossReason, Owner, Result};
pub use limiter::{RateArgs, RateLimiter, RateType};

#[doc(hidden)]
/// Every script this crate runs, for tests and tools that load or check them.
pub fn scripts() -> [&'static ferrisson_core::__engine::Script; 6] {
    [
        &inspect::INSPECT,
        &limiter::PRELUDE,
        &limiter::TRY_ACQUIRE,
        &limiter::SET_RATE,
        &limiter::RELEASE,
        &limiter::AVAILABLE,
    ]
}
