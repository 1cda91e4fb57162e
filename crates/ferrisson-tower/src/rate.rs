//! The rate limit: permits of a rate limiter per call.

use std::task::{Context, Poll};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use tower_layer::Layer;
use tower_service::Service;

use ferrisson_core::{AcquireOptions, Result};
use ferrisson_rate_limiter::RateLimiter;

use crate::BoxError;
use crate::limited::{Limited, Source};

/// Limits calls across every instance to the rate of a [`RateLimiter`]: each call takes its
/// permits (1 unless [`with_permits_per_call`](Self::with_permits_per_call)) before it runs.
///
/// Build the limiter with its rate ([`RateLimiter::with_rate`]): the layer then heals by
/// itself when Redis loses the rate (a restart without persistence, `FLUSHALL`), where a
/// limiter set up once with `try_set_rate` would fail every call with `NotSetUp`.
#[derive(Debug, Clone)]
pub struct DistributedRateLimitLayer {
    limiter: RateLimiter,
    permits: u32,
    max_wait: Option<Duration>,
}

impl DistributedRateLimitLayer {
    /// A limit at `limiter`'s rate, one permit a call; a call waits as long as the rate says.
    pub fn new(limiter: RateLimiter) -> Self {
        Self {
            limiter,
            permits: 1,
            max_wait: None,
        }
    }

    /// This limit, each call taking `permits` (a batch call that counts as several).
    pub fn with_permits_per_call(mut self, permits: u32) -> Self {
        self.permits = permits;
        self
    }

    /// This limit, a call waiting at most `wait` for its permits, then failing with
    /// [`LimitExceeded`](crate::LimitExceeded) (`Duration::ZERO`: shed at once).
    pub fn with_max_wait(mut self, wait: Duration) -> Self {
        self.max_wait = Some(wait);
        self
    }
}

impl<T> Layer<T> for DistributedRateLimitLayer {
    type Service = DistributedRateLimit<T>;

    fn layer(&self, inner: T) -> Self::Service {
        let source = Rate {
            limiter: self.limiter.clone(),
            permits: self.permits,
        };
        DistributedRateLimit {
            limited: Limited::new(inner, source, self.max_wait),
        }
    }
}

/// A rate limiter's permits as what lets a call through: taken, never given back.
#[derive(Clone)]
struct Rate {
    limiter: RateLimiter,
    permits: u32,
}

impl Source for Rate {
    type Held = ();

    fn take(&self, wait: Option<Duration>) -> BoxFuture<'static, Result<Option<()>>> {
        let (limiter, permits) = (self.limiter.clone(), self.permits);
        async move {
            match wait {
                Some(wait) => limiter
                    .try_acquire_with(permits, AcquireOptions::new().with_wait(wait))
                    .await
                    .map(|taken| taken.then_some(())),
                None => limiter.acquire(permits).await.map(Some),
            }
        }
        .boxed()
    }
}

/// The service of a [`DistributedRateLimitLayer`]. Its clones each take their own permits.
pub struct DistributedRateLimit<T> {
    limited: Limited<T, Rate>,
}

impl<T: Clone> Clone for DistributedRateLimit<T> {
    fn clone(&self) -> Self {
        Self {
            limited: self.limited.clone(),
        }
    }
}

impl<T> std::fmt::Debug for DistributedRateLimit<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DistributedRateLimit")
            .field("permits_per_call", &self.limited.source().permits)
            .field("max_wait", &self.limited.max_wait())
            .field("state", &self.limited.state())
            .finish_non_exhaustive()
    }
}

impl<T, Request> Service<Request> for DistributedRateLimit<T>
where
    T: Service<Request>,
    T::Future: Send + 'static,
    T::Error: Into<BoxError>,
{
    type Response = T::Response;
    type Error = BoxError;
    type Future = BoxFuture<'static, std::result::Result<T::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<std::result::Result<(), BoxError>> {
        self.limited.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        self.limited.call(request)
    }
}
