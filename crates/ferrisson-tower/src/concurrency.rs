//! The concurrency limit: a permit of a semaphore per call in flight.

use std::task::{Context, Poll};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use tower_layer::Layer;
use tower_service::Service;

use ferrisson_core::{AcquireOptions, Result};

use crate::BoxError;
use crate::limited::{Limited, Source};

/// Where a concurrency limit takes its permits: either semaphore.
pub trait PermitSource: Clone + Send + Sync + 'static {
    /// A permit; dropping it gives it back (in the background).
    type Permit: Send + 'static;

    /// One permit, waiting at most `wait` (`None`: as long as it takes); `Ok(None)` when the
    /// wait passed.
    fn take(&self, wait: Option<Duration>) -> BoxFuture<'static, Result<Option<Self::Permit>>>;
}

/// `PermitSource` for a semaphore type whose `acquire` and `try_acquire_with` give `$permit`:
/// both semaphores have the same calls.
macro_rules! permit_source {
    ($semaphore:ty, $permit:ty) => {
        impl PermitSource for $semaphore {
            type Permit = $permit;

            fn take(
                &self,
                wait: Option<Duration>,
            ) -> BoxFuture<'static, Result<Option<Self::Permit>>> {
                let semaphore = self.clone();
                async move {
                    match wait {
                        Some(wait) => {
                            semaphore
                                .try_acquire_with(AcquireOptions::new().with_wait(wait))
                                .await
                        }
                        None => semaphore.acquire().await.map(Some),
                    }
                }
                .boxed()
            }
        }
    };
}

permit_source!(ferrisson_semaphore::Semaphore, ferrisson_semaphore::Permits);
permit_source!(
    ferrisson_expirable_semaphore::ExpirableSemaphore,
    ferrisson_expirable_semaphore::Permit
);

/// Limits the requests in flight across every instance to the permits of `source`.
#[derive(Debug, Clone)]
pub struct DistributedConcurrencyLimitLayer<S> {
    source: S,
    max_wait: Option<Duration>,
}

impl<S: PermitSource> DistributedConcurrencyLimitLayer<S> {
    /// A limit over `source`'s permits (set them with `try_set_permits` first); a call waits
    /// for a permit as long as it takes.
    pub fn new(source: S) -> Self {
        Self {
            source,
            max_wait: None,
        }
    }

    /// This limit, a call waiting at most `wait` for its permit, then failing with
    /// [`LimitExceeded`](crate::LimitExceeded) (`Duration::ZERO`: shed at once when none is free).
    pub fn with_max_wait(mut self, wait: Duration) -> Self {
        self.max_wait = Some(wait);
        self
    }
}

impl<S: PermitSource, T> Layer<T> for DistributedConcurrencyLimitLayer<S> {
    type Service = DistributedConcurrencyLimit<T, S>;

    fn layer(&self, inner: T) -> Self::Service {
        DistributedConcurrencyLimit {
            limited: Limited::new(inner, Semaphore(self.source.clone()), self.max_wait),
        }
    }
}

/// A [`PermitSource`] as what lets a call through.
#[derive(Clone)]
struct Semaphore<S>(S);

impl<S: PermitSource> Source for Semaphore<S> {
    type Held = S::Permit;

    fn take(&self, wait: Option<Duration>) -> BoxFuture<'static, Result<Option<S::Permit>>> {
        self.0.take(wait)
    }
}

/// The service of a [`DistributedConcurrencyLimitLayer`]. Its clones each take their own
/// permit (a clone starts with none).
pub struct DistributedConcurrencyLimit<T, S: PermitSource> {
    limited: Limited<T, Semaphore<S>>,
}

impl<T: Clone, S: PermitSource> Clone for DistributedConcurrencyLimit<T, S> {
    fn clone(&self) -> Self {
        Self {
            limited: self.limited.clone(),
        }
    }
}

impl<T, S: PermitSource> std::fmt::Debug for DistributedConcurrencyLimit<T, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DistributedConcurrencyLimit")
            .field("max_wait", &self.limited.max_wait())
            .field("state", &self.limited.state())
            .finish_non_exhaustive()
    }
}

impl<T, S, Request> Service<Request> for DistributedConcurrencyLimit<T, S>
where
    T: Service<Request>,
    T::Future: Send + 'static,
    T::Error: Into<BoxError>,
    S: PermitSource,
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
