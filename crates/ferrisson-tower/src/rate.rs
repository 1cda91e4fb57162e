//! The rate limit: permits of a rate limiter per call.

use std::task::{Context, Poll};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use tower_layer::Layer;
use tower_service::Service;

use ferrisson_core::{AcquireOptions, Result};
use ferrisson_rate_limiter::RateLimiter;

use crate::{BoxError, LimitExceeded};

/// Limits calls across every instance to the rate of a [`RateLimiter`] (set it with
/// `try_set_rate` first): each call takes its permits (1 unless
/// [`with_permits_per_call`](Self::with_permits_per_call)) before it runs.
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
    /// [`LimitExceeded`] (`Duration::ZERO`: shed at once).
    pub fn with_max_wait(mut self, wait: Duration) -> Self {
        self.max_wait = Some(wait);
        self
    }
}

impl<T> Layer<T> for DistributedRateLimitLayer {
    type Service = DistributedRateLimit<T>;

    fn layer(&self, inner: T) -> Self::Service {
        DistributedRateLimit {
            inner,
            layer: self.clone(),
            state: State::Idle,
        }
    }
}

enum State {
    Idle,
    Taking(BoxFuture<'static, Result<bool>>),
    Ready,
}

/// The service of a [`DistributedRateLimitLayer`]. Its clones each take their own permits.
pub struct DistributedRateLimit<T> {
    inner: T,
    layer: DistributedRateLimitLayer,
    state: State,
}

impl<T: Clone> Clone for DistributedRateLimit<T> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            layer: self.layer.clone(),
            state: State::Idle,
        }
    }
}

impl<T> std::fmt::Debug for DistributedRateLimit<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DistributedRateLimit")
            .field("layer", &self.layer)
            .field("ready", &matches!(self.state, State::Ready))
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
        loop {
            match &mut self.state {
                State::Ready => return self.inner.poll_ready(cx).map_err(Into::into),
                State::Idle => {
                    let (limiter, permits, wait) = (
                        self.layer.limiter.clone(),
                        self.layer.permits,
                        self.layer.max_wait,
                    );
                    self.state = State::Taking(
                        async move {
                            match wait {
                                Some(wait) => {
                                    limiter
                                        .try_acquire_with(
                                            permits,
                                            AcquireOptions::new().with_wait(wait),
                                        )
                                        .await
                                }
                                None => limiter.acquire(permits).await.map(|()| true),
                            }
                        }
                        .boxed(),
                    );
                }
                State::Taking(taking) => match taking.poll_unpin(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Ok(true)) => self.state = State::Ready,
                    Poll::Ready(Ok(false)) => {
                        self.state = State::Idle;
                        let waited = self.layer.max_wait.unwrap_or_default();
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
        if !matches!(
            std::mem::replace(&mut self.state, State::Idle),
            State::Ready
        ) {
            return async {
                Err::<T::Response, BoxError>(
                    "called before poll_ready returned Ready: no permits were taken".into(),
                )
            }
            .boxed();
        }
        let response = self.inner.call(request);
        async move { response.await.map_err(Into::into) }.boxed()
    }
}
