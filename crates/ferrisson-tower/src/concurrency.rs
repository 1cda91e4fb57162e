//! The concurrency limit: a permit of a semaphore per call in flight.

use std::task::{Context, Poll};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use tower_layer::Layer;
use tower_service::Service;

use ferrisson_core::{AcquireOptions, Result};

use crate::{BoxError, LimitExceeded};

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
    /// [`LimitExceeded`] (`Duration::ZERO`: shed at once when none is free).
    pub fn with_max_wait(mut self, wait: Duration) -> Self {
        self.max_wait = Some(wait);
        self
    }
}

impl<S: PermitSource, T> Layer<T> for DistributedConcurrencyLimitLayer<S> {
    type Service = DistributedConcurrencyLimit<T, S>;

    fn layer(&self, inner: T) -> Self::Service {
        DistributedConcurrencyLimit {
            inner,
            source: self.source.clone(),
            max_wait: self.max_wait,
            state: State::Idle,
        }
    }
}

/// Where a service stands on its permit.
enum State<P> {
    /// No permit, none asked for.
    Idle,
    /// Asked for, not yet given.
    Taking(BoxFuture<'static, Result<Option<P>>>),
    /// Held, for the next call.
    Ready(P),
}

/// The service of a [`DistributedConcurrencyLimitLayer`]. Its clones each take their own
/// permit (a clone starts with none).
pub struct DistributedConcurrencyLimit<T, S: PermitSource> {
    inner: T,
    source: S,
    max_wait: Option<Duration>,
    state: State<S::Permit>,
}

impl<T: Clone, S: PermitSource> Clone for DistributedConcurrencyLimit<T, S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            source: self.source.clone(),
            max_wait: self.max_wait,
            state: State::Idle,
        }
    }
}

impl<T, S: PermitSource> std::fmt::Debug for DistributedConcurrencyLimit<T, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match self.state {
            State::Idle => "idle",
            State::Taking(_) => "taking a permit",
            State::Ready(_) => "holding a permit",
        };
        f.debug_struct("DistributedConcurrencyLimit")
            .field("max_wait", &self.max_wait)
            .field("state", &state)
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
        loop {
            match &mut self.state {
                State::Ready(_) => return self.inner.poll_ready(cx).map_err(Into::into),
                State::Idle => self.state = State::Taking(self.source.take(self.max_wait)),
                State::Taking(taking) => match taking.poll_unpin(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Ok(Some(permit))) => self.state = State::Ready(permit),
                    Poll::Ready(Ok(None)) => {
                        self.state = State::Idle;
                        let waited = self.max_wait.unwrap_or_default();
                        return Poll::Ready(Err(Box::new(LimitExceeded { waited })));
                    }
                    Poll::Ready(Err(e)) => {
                        self.state = State::Idle;
                        return Poll::Ready(Err(Box::new(e)));
                    }
                },
            }
        }
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let State::Ready(permit) = std::mem::replace(&mut self.state, State::Idle) else {
            // Called without `poll_ready` having said ready: tower's contract is broken, and
            // the call is refused rather than run past the limit.
            return async {
                Err::<T::Response, BoxError>(
                    "called before poll_ready returned Ready: no permit is held".into(),
                )
            }
            .boxed();
        };
        let response = self.inner.call(request);
        async move {
            let out = response.await.map_err(Into::into);
            // The permit goes back when the response is in (or with this future, dropped).
            drop(permit);
            out
        }
        .boxed()
    }
}
