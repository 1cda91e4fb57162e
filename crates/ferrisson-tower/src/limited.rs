//! What both layers' services share: a permit taken in `poll_ready`, held for the next call,
//! and kept until that call's response future completes or is dropped.

use std::task::{Context, Poll};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use sync_wrapper::SyncWrapper;
use tower_service::Service;

use ferrisson_core::Result;

use crate::{BoxError, LimitExceeded};

/// Where a service takes what lets a call through: a semaphore's permit, or a rate limiter's
/// permits (nothing to give back).
pub(crate) trait Source: Clone + Send + Sync + 'static {
    /// What a call holds while it runs; dropping it gives it back (if anything).
    type Held: Send + 'static;

    /// What a call needs, waiting at most `wait` (`None`: as long as it takes); `Ok(None)`
    /// when the wait passed.
    fn take(&self, wait: Option<Duration>) -> BoxFuture<'static, Result<Option<Self::Held>>>;
}

/// Where a service stands on what lets its next call through. The future and the held value
/// sit in [`SyncWrapper`]s: the service is reached only through `&mut self`, and axum's
/// router needs its services `Sync`.
enum State<H> {
    /// Nothing held, nothing asked for.
    Idle,
    /// Asked for, not yet given.
    Taking(SyncWrapper<BoxFuture<'static, Result<Option<H>>>>),
    /// Held, for the next call.
    Ready(SyncWrapper<H>),
}

/// A service `inner` behind `source`.
pub(crate) struct Limited<T, S: Source> {
    inner: T,
    source: S,
    max_wait: Option<Duration>,
    state: State<S::Held>,
}

impl<T, S: Source> Limited<T, S> {
    pub(crate) fn new(inner: T, source: S, max_wait: Option<Duration>) -> Self {
        Self {
            inner,
            source,
            max_wait,
            state: State::Idle,
        }
    }

    /// Where the service stands, for `Debug`.
    pub(crate) fn state(&self) -> &'static str {
        match self.state {
            State::Idle => "idle",
            State::Taking(_) => "taking a permit",
            State::Ready(_) => "holding a permit",
        }
    }

    pub(crate) fn source(&self) -> &S {
        &self.source
    }

    pub(crate) fn max_wait(&self) -> Option<Duration> {
        self.max_wait
    }
}

impl<T: Clone, S: Source> Clone for Limited<T, S> {
    /// A clone starts with nothing held: each takes its own permit.
    fn clone(&self) -> Self {
        Self::new(self.inner.clone(), self.source.clone(), self.max_wait)
    }
}

impl<T, S, Request> Service<Request> for Limited<T, S>
where
    T: Service<Request>,
    T::Future: Send + 'static,
    T::Error: Into<BoxError>,
    S: Source,
{
    type Response = T::Response;
    type Error = BoxError;
    type Future = BoxFuture<'static, std::result::Result<T::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<std::result::Result<(), BoxError>> {
        loop {
            match &mut self.state {
                State::Ready(_) => return self.inner.poll_ready(cx).map_err(Into::into),
                State::Idle => {
                    let taking = self.source.take(self.max_wait);
                    self.state = State::Taking(SyncWrapper::new(taking));
                }
                State::Taking(taking) => match taking.get_mut().poll_unpin(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Ok(Some(held))) => {
                        self.state = State::Ready(SyncWrapper::new(held));
                    }
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
        let State::Ready(held) = std::mem::replace(&mut self.state, State::Idle) else {
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
            drop(held);
            out
        }
        .boxed()
    }
}
