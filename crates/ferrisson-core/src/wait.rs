//! The wait loop every waiting call shares: register (early when the channel is live), try,
//! sleep until a message, a hand-off, the TTL the try returned or a re-check, through outages
//! and up to a deadline.

use std::time::Duration;

use crate::client::ClientEngine;
use crate::error::{Error, Result};
use crate::guard::HoldGuard;
use tokio::time::Instant;

/// How long a waiter sleeps before trying again, from the TTL an acquire script returned:
/// the lock's remaining lease (at least a millisecond), or `recheck` when it has no expiry.
pub fn ttl_bound(ttl_ms: i64, recheck: Duration) -> Duration {
    match u64::try_from(ttl_ms) {
        Ok(0) => Duration::from_millis(1),
        Ok(ms) => Duration::from_millis(ms),
        // -1: held without expiry (not one of ours); re-check once a lease.
        Err(_) => recheck,
    }
}

/// How a waiter waits: on which channel, woken how, until when, re-checking how often.
#[derive(Clone)]
pub struct WaitSpec<'a> {
    /// The channel releases are published on.
    pub channel: &'a str,
    /// Which local waiters a message wakes.
    pub policy: crate::pubsub::WakePolicy,
    /// Give up then (`None`: never).
    pub deadline: Option<Instant>,
    /// The longest sleep between two tries, whatever the TTL says (a heartbeat).
    pub recheck: Duration,
    /// What the waiter tells a local releaser that may hand it what it waits for
    /// ([`Client::claim_waiter`](crate::Client::claim_waiter)); `None`: no hand-offs.
    pub tag: Option<crate::engine::Tag>,
}

/// How often a waiter re-checks while its subscription is not confirmed (pub/sub down).
const UNCONFIRMED_RECHECK: Duration = Duration::from_millis(500);

/// Waits for a lock whose first try failed: subscribes to the release channel, tries again
/// (so a release between the first try and the subscription is not missed), then sleeps until
/// a message, the TTL the last try returned or `recheck` (whichever comes first) and tries
/// again, until `attempt` takes the hold (`Ok(Some)`) or the deadline passes (`Ok(None)`).
/// Through a Redis outage it keeps trying with back-off, for up to the client's outage limit.
///
/// No message is needed for progress: a lost one only delays the waiter to its next re-check.
///
/// # Errors
///
/// The first non-connection error of `attempt`, or a connection error once the outage has
/// lasted longer than the client's `wait_outage_limit`.
pub async fn wait_for_turn<T, F, Fut>(
    client: &crate::Client,
    spec: WaitSpec<'_>,
    attempt: F,
) -> Result<Option<T>>
where
    T: Send + 'static,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Attempt<T>>>,
{
    let subscription = subscribe_confirmed(client, &spec, spec.tag.clone()).await;
    wait_on(client, &subscription, &spec, FirstRound::Try, attempt).await
}

/// Registers a waiter on `spec`'s channel (carrying `tag` for hand-offs) and waits, up to one
/// response timeout (and never past the deadline), for the subscription to be confirmed. An
/// unconfirmed one still works: the wait loop then re-checks often (a message could be missed).
pub async fn subscribe_confirmed(
    client: &crate::Client,
    spec: &WaitSpec<'_>,
    tag: Option<crate::engine::Tag>,
) -> crate::engine::Subscription {
    let response_timeout = client.config().get_response_timeout();
    let subscription = client.subscribe(spec.channel, spec.policy, tag);
    let confirm_within = match spec.deadline {
        Some(d) => d.saturating_duration_since(Instant::now()),
        None => response_timeout,
    };
    Box::pin(subscription.confirmed(confirm_within.min(response_timeout))).await;
    subscription
}

/// How [`wait_on`] starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirstRound {
    /// Sleep first: the caller queued behind other local waiters without a try of its own.
    Sleep,
    /// Try first; a failed try starts the outage back-off, as a later one does.
    Try,
    /// Try first, as the caller's very first try: its error is returned at once, as the first
    /// try of a caller that did not register early.
    FirstTry,
}

/// Registers a caller that is about to try, if its channel is subscribed and confirmed already
/// (other local waiters are on it, or it lingers after the last one left): every message
/// published from now on reaches it, so its wait needs no second try after subscribing. Then
/// the caller makes its first try inside [`wait_registered`]; `None`: it tries first, then
/// waits.
pub fn register_early(
    client: &crate::Client,
    spec: &WaitSpec<'_>,
) -> Option<crate::engine::Subscription> {
    client.subscribe_if_live(spec.channel, spec.policy, || spec.tag.clone())
}

/// How a call that may wait starts ([`begin_wait`]).
#[derive(Debug)]
pub enum Start<T> {
    /// Done without waiting: taken (`Some`) or, for a call that does not wait, not (`None`).
    Done(Option<T>),
    /// To wait, registered early or not: hand this to [`wait_registered`].
    Wait(Option<crate::engine::Subscription>),
}

/// The start every waiting call shares: registered early when its channel is live (then its
/// first try is left to [`wait_registered`]), else one try, which may end the call.
///
/// # Errors
///
/// The first try's error.
pub async fn begin_wait<T, F, Fut>(
    client: &crate::Client,
    spec: &WaitSpec<'_>,
    waits: bool,
    attempt: F,
) -> Result<Start<T>>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<Attempt<T>>>,
{
    if waits && let Some(early) = register_early(client, spec) {
        return Ok(Start::Wait(Some(early)));
    }
    Ok(match attempt().await? {
        Attempt::Acquired(taken) => Start::Done(Some(taken)),
        Attempt::Held(_) if !waits => Start::Done(None),
        Attempt::Held(_) => Start::Wait(None),
    })
}

/// Waits as [`wait_for_turn`] does, for a caller registered early or not, starting the loop
/// with `early`'s round. Registered early ([`register_early`]: [`FirstRound::FirstTry`]), its
/// first try is made here, in the loop, so that a local releaser cannot hand it anything while
/// that try is in flight (an error of that try is returned at once, as the first try's error
/// of any caller); registered behind waiters without a try ([`FirstRound::Sleep`]), it sleeps
/// first; not registered, it has tried once already, and this subscribes and tries again.
///
/// # Errors
///
/// As [`wait_for_turn`].
pub async fn wait_registered<T, F, Fut>(
    client: &crate::Client,
    early: Option<(&crate::engine::Subscription, FirstRound)>,
    spec: WaitSpec<'_>,
    attempt: F,
) -> Result<Option<T>>
where
    T: Send + 'static,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Attempt<T>>>,
{
    match early {
        Some((subscription, first)) => wait_on(client, subscription, &spec, first, attempt).await,
        None => wait_for_turn(client, spec, attempt).await,
    }
}

/// The loop of [`wait_for_turn`] on a subscription the caller made (and confirmed) itself:
/// tries (unless `first` is [`FirstRound::Sleep`]: the first round only sleeps, for a waiter that queued
/// behind others without trying), takes a hand-off when one arrives, and sleeps until a
/// message, the TTL the last try returned or `spec.recheck`.
///
/// A function returning an `async` block: an `async fn` would keep its parameters beside the
/// copies its body makes of them for as long as the waiter waits.
///
/// # Errors
///
/// As [`wait_for_turn`].
#[allow(
    clippy::manual_async_fn,
    reason = "an async fn stores its parameters twice, for as long as the waiter waits"
)]
pub fn wait_on<T, F, Fut>(
    client: &crate::Client,
    subscription: &crate::engine::Subscription,
    spec: &WaitSpec<'_>,
    mut first: FirstRound,
    mut attempt: F,
) -> impl std::future::Future<Output = Result<Option<T>>>
where
    T: Send + 'static,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Attempt<T>>>,
{
    async move {
        let config = client.config();
        let mut pacer = WaitPacer::new(spec.deadline);
        loop {
            let bound = if first == FirstRound::Sleep {
                // Queued without a try: nothing is known, so re-check once a `recheck` at most.
                spec.recheck
            } else {
                match subscription.begin_try() {
                    Err(Some(handoff)) => {
                        subscription.satisfied();
                        return handed(handoff).map(Some);
                    }
                    // A local releaser claimed this waiter: what it waits for (or a wake-up, if
                    // the hand-off fails) is on its way; trying now could take it twice.
                    Err(None) => config.get_response_timeout(),
                    Ok(trying) => {
                        let result = attempt().await;
                        drop(trying);
                        match result {
                            Ok(Attempt::Acquired(taken)) => {
                                subscription.satisfied();
                                return Ok(Some(taken));
                            }
                            Ok(Attempt::Held(ttl)) => {
                                subscription.tried_in_vain();
                                pacer.held();
                                ttl_bound(ttl, spec.recheck).min(spec.recheck)
                            }
                            Err(e) if first == FirstRound::FirstTry => return Err(e),
                            Err(e) => pacer.failed(e, config)?,
                        }
                    }
                }
            };
            first = FirstRound::Try;
            let Some(bound) = pacer.next_sleep(bound, subscription.is_confirmed()) else {
                return Ok(None);
            };
            // A message, a hand-off or the bound: either way, look again; a release the client
            // lets pass (another client's turn) only after a short wait for nothing else.
            let mut woken = subscription.wait(bound).await;
            while let crate::engine::Woken::Deferred = woken {
                let Some(fallback) =
                    pacer.next_sleep(crate::engine::TURN_FALLBACK, subscription.is_confirmed())
                else {
                    return Ok(None);
                };
                woken = subscription.wait(fallback).await;
            }
            if let crate::engine::Woken::Handed(handoff) = woken {
                subscription.satisfied();
                return handed(handoff).map(Some);
            }
        }
    }
}

/// What a local releaser handed over, as the type the waiter waits for.
fn handed<T: 'static>(handoff: crate::engine::Handoff) -> Result<T> {
    handoff.downcast::<T>().map(|taken| *taken).map_err(|_| {
        Error::Protocol("a local hand-off carried something else than was waited for".into())
    })
}

/// The pace of a wait loop: how long to sleep between tries, through outages and up to the
/// wait's deadline.
#[derive(Debug)]
pub struct WaitPacer {
    deadline: Option<Instant>,
    outage_since: Option<Instant>,
    failures: u32,
}

impl WaitPacer {
    /// A pacer for a wait that gives up at `deadline` (`None`: never).
    pub fn new(deadline: Option<Instant>) -> Self {
        Self {
            deadline,
            outage_since: None,
            failures: 0,
        }
    }

    /// A try reached Redis (and found the lock taken): any outage is over.
    pub fn held(&mut self) {
        self.outage_since = None;
        self.failures = 0;
    }

    /// A try failed with `e`: the back-off before the next try while a connection outage has
    /// lasted less than the client's outage limit.
    ///
    /// # Errors
    ///
    /// `e` itself when it is not a connection error, or when the outage has lasted too long.
    pub fn failed(&mut self, e: Error, config: &crate::ClientConfig) -> Result<Duration> {
        if !e.is_connection_error() {
            return Err(e);
        }
        let since = *self.outage_since.get_or_insert_with(Instant::now);
        if since.elapsed() > config.get_wait_outage_limit() {
            return Err(e);
        }
        self.failures += 1;
        tracing::debug!(error = %e, failures = self.failures, "waiting through a redis outage");
        Ok(config.get_retry().backoff(self.failures))
    }

    /// How long to sleep before the next try: `bound`, at most a short re-check while the
    /// subscription is not `confirmed` (a message could be missed), and no later than the
    /// deadline; `None` once the deadline has passed.
    pub fn next_sleep(&self, bound: Duration, confirmed: bool) -> Option<Duration> {
        let bound = if confirmed {
            bound
        } else {
            bound.min(UNCONFIRMED_RECHECK)
        };
        match self.deadline {
            Some(deadline) => {
                let remaining = deadline.saturating_duration_since(Instant::now());
                (!remaining.is_zero()).then(|| bound.min(remaining))
            }
            None => Some(bound),
        }
    }
}

/// What one acquire script call did.
pub enum Attempt<T = HoldGuard> {
    /// The hold (or the permits) was taken.
    Acquired(T),
    /// Not taken; the TTL the script returned (the lock's remaining lease, negative when it
    /// has none).
    Held(i64),
}
