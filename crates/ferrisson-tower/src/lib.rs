//! [`tower`](https://docs.rs/tower) layers whose limits hold across every instance of a
//! service, through Redis: tower's own `ConcurrencyLimitLayer` and `RateLimitLayer` count in
//! one process only.
//!
//! - [`DistributedConcurrencyLimitLayer`]: at most N requests in flight across all instances,
//!   over a [`Semaphore`](ferrisson_semaphore::Semaphore) or, for permits that come back by
//!   themselves when an instance dies, an
//!   [`ExpirableSemaphore`](ferrisson_expirable_semaphore::ExpirableSemaphore).
//! - [`DistributedRateLimitLayer`]: at most the rate of a
//!   [`RateLimiter`](ferrisson_rate_limiter::RateLimiter) across all instances.
//!
//! Both work on servers (an axum router's `layer`) and on outgoing clients (any
//! `tower::Service`: a hyper-util client, `service_fn` around reqwest). As tower's own limit
//! layers, they take their permit in `poll_ready`: a service is ready once it holds one. A
//! permit goes back when the response future completes or is dropped. With a maximum wait
//! ([`with_max_wait`](DistributedConcurrencyLimitLayer::with_max_wait)), a call that cannot
//! get its permit in time fails with [`LimitExceeded`] (map it to 429 or 503); without one,
//! it waits as long as it takes.
//!
//! With both limits on one service, put the concurrency limit outside the rate limit
//! (`ServiceBuilder::new().layer(concurrency).layer(rate)`): a call then waits for its place in
//! flight first and takes its permit of the rate right before it runs. The other way round, a
//! rate permit would age while its call waited for a place, and calls could bunch up past the
//! rate.
//!
//! On an axum router, turn the layer's errors into responses with axum's `HandleErrorLayer`
//! (the router takes only services that cannot fail): `crates/ferrisson-examples/examples/axum_server.rs` in the
//! repository sheds with 503 and a `Retry-After`, and limits two server processes together.
//! `crates/ferrisson-examples/examples/tower_outgoing.rs` puts both limits on an outgoing client in three processes.
//!
//! ```no_run
//! # async fn demo() -> Result<(), tower::BoxError> {
//! use std::time::Duration;
//! use ferrisson_semaphore::{Client, Semaphore};
//! use ferrisson_tower::DistributedConcurrencyLimitLayer;
//! use tower::{Service, ServiceBuilder, ServiceExt};
//!
//! let client = Client::connect("redis://127.0.0.1:6379").await?;
//! let slots = Semaphore::new(&client, "partner-api")?;
//! slots.try_set_permits(20).await?;
//! let mut partner = ServiceBuilder::new()
//!     .layer(DistributedConcurrencyLimitLayer::new(slots).with_max_wait(Duration::from_secs(2)))
//!     .service_fn(|order: u64| async move { Ok::<_, tower::BoxError>(order * 2) });
//! let doubled = partner.ready().await?.call(21).await?;
//! # assert_eq!(doubled, 42);
//! # Ok(()) }
//! ```

// The rate limiter's acquire future nests deeply (its wait loop over a settled script call):
// the layout of the future boxed here takes more than the default 128 query levels.
#![recursion_limit = "256"]

mod concurrency;
mod limited;
mod rate;

pub use concurrency::{
    DistributedConcurrencyLimit, DistributedConcurrencyLimitLayer, PermitSource,
};
pub use rate::{DistributedRateLimit, DistributedRateLimitLayer};

/// The error of a service behind these layers: the inner service's, a [`LimitExceeded`], or
/// a ferrisson [`Error`](ferrisson_core::Error) (Redis unreachable, …), boxed as tower's
/// own layers box theirs.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A call could not get its permit within the layer's maximum wait: shed it (HTTP 429 or 503).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitExceeded {
    /// The maximum wait that passed.
    pub waited: std::time::Duration,
}

impl std::fmt::Display for LimitExceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the distributed limit allowed no call within {:?}",
            self.waited
        )
    }
}

impl std::error::Error for LimitExceeded {}
