//! The wait loop every waiting call shares: register (early when the channel is live), try,
//! sleep until a message, a hand-off, the TTL the try returned or a re-check, through outages
//! and up to a deadline.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::grant::{Grant, Taken};
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
    /// The longest sleeps between two tries, whatever the TTL says: `min` after the first try
    /// in vain, growing to `max` (a heartbeat; [`Backoff::fixed`] for one pause).
    ///
    /// [`Backoff::fixed`]: crate::config::Backoff::fixed
    pub recheck: crate::config::Backoff,
    /// What the waiter tells a local releaser that may hand it what it waits for (a
    /// releaser claims it for what it hands over, `Need::takes`: `ClientEngine::claim_waiter`);
    /// `None`: no hand-offs.
    pub need: Option<crate::pubsub::Need>,
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
    wait_handed(client, spec, attempt, |_| None).await
}

/// As [`wait_for_turn`], for a waiter a local releaser may hand what it waits for
/// (`spec.need`): `accept` makes what was handed over ([`Taken`]) the wait's output, as a
/// taken try's reply is made one.
///
/// # Errors
///
/// As [`wait_for_turn`].
pub async fn wait_handed<T, F, Fut>(
    client: &crate::Client,
    spec: WaitSpec<'_>,
    attempt: F,
    accept: impl FnMut(Taken) -> Option<T>,
) -> Result<Option<T>>
where
    T: Send + 'static,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Attempt<T>>>,
{
    let subscription = subscribe_confirmed(client, &spec, spec.need.clone()).await;
    wait_on(
        client,
        &subscription,
        &spec,
        FirstRound::Try,
        attempt,
        accept,
    )
    .await
}

/// Registers a waiter on `spec`'s channel (with `need`, a local releaser may hand it what it
/// waits for) and waits, up to one response timeout (and never past the deadline), for the
/// subscription to be confirmed. An unconfirmed one still works: the wait loop then re-checks
/// often (a message could be missed).
pub async fn subscribe_confirmed(
    client: &crate::Client,
    spec: &WaitSpec<'_>,
    need: Option<crate::pubsub::Need>,
) -> crate::pubsub::Subscription {
    let response_timeout = client.config().response_timeout();
    let subscription = client.hub().subscribe(spec.channel, spec.policy, need);
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
) -> Option<crate::pubsub::Subscription> {
    client
        .hub()
        .subscribe_if_live(spec.channel, spec.policy, || spec.need.clone())
}

/// How a call that may wait starts ([`begin_wait`]).
#[derive(Debug)]
pub enum Start<T> {
    /// Done without waiting: taken (`Some`) or, for a call that does not wait, not (`None`).
    Done(Option<T>),
    /// To wait, registered early or not: hand this to [`wait_registered`].
    Wait(Option<crate::pubsub::Subscription>),
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
    Ok(match first_try(client, spec.deadline, attempt()).await? {
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
    early: Option<(&crate::pubsub::Subscription, FirstRound)>,
    spec: WaitSpec<'_>,
    attempt: F,
    accept: impl FnMut(Taken) -> Option<T>,
) -> Result<Option<T>>
where
    T: Send + 'static,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Attempt<T>>>,
{
    match early {
        Some((subscription, first)) => {
            wait_on(client, subscription, &spec, first, attempt, accept).await
        }
        None => wait_handed(client, spec, attempt, accept).await,
    }
}

/// The loop of [`wait_for_turn`] on a subscription the caller made (and confirmed) itself:
/// tries (unless `first` is [`FirstRound::Sleep`]: the first round only sleeps, for a waiter that queued
/// behind others without trying), takes a hand-off when one arrives (made the output by
/// `accept`), and sleeps until a
/// message, the TTL the last try returned or `spec.recheck`. Tries after the first go through
/// a [`WaitPacer`]: the outage rule and the deadline bound them.
///
/// A function returning an `async` block: an `async fn` would keep its parameters beside the
/// copies its body makes of them for as long as the waiter waits.
///
/// # Errors
///
/// As [`wait_for_turn`], and [`Error::Closed`] once the client is shut down.
#[allow(
    clippy::manual_async_fn,
    reason = "an async fn stores its parameters twice, for as long as the waiter waits"
)]
pub fn wait_on<T, F, Fut>(
    client: &crate::Client,
    subscription: &crate::pubsub::Subscription,
    spec: &WaitSpec<'_>,
    mut first: FirstRound,
    mut attempt: F,
    mut accept: impl FnMut(Taken) -> Option<T>,
) -> impl std::future::Future<Output = Result<Option<T>>>
where
    T: Send + 'static,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Attempt<T>>>,
{
    async move {
        let mut pacer = WaitPacer::new(client, spec.deadline);
        // Tries in vain so far: the re-check grows with them (`spec.recheck`).
        let mut vain = 0u32;
        loop {
            let recheck = spec.recheck.delay(vain);
            let bound = if first == FirstRound::Sleep {
                // Queued without a try: nothing is known, so re-check once a `recheck` at most.
                recheck
            } else {
                match subscription.begin_try() {
                    Err(Some(grant)) => match handed(spec, &mut accept, grant) {
                        Some(taken) => {
                            subscription.satisfied();
                            return Ok(Some(taken));
                        }
                        None => Duration::ZERO,
                    },
                    // A local releaser claimed this waiter: what it waits for (or a wake-up, if
                    // the hand-off fails) is on its way; trying now could take it twice.
                    Err(None) => client.config().response_timeout(),
                    Ok(trying) => {
                        let result = if first == FirstRound::FirstTry {
                            // The call's very first try: its error is the call's, at once.
                            pacer.first_attempt(attempt()).await
                        } else {
                            pacer.attempt(attempt()).await
                        };
                        drop(trying);
                        match result? {
                            Paced::Reached(Attempt::Acquired(taken)) => {
                                subscription.satisfied();
                                return Ok(Some(taken));
                            }
                            Paced::Reached(Attempt::Held(ttl)) => {
                                subscription.tried_in_vain();
                                vain = vain.saturating_add(1);
                                ttl_bound(ttl, recheck).min(recheck)
                            }
                            Paced::Failed(pause) => pause,
                        }
                    }
                }
            };
            first = FirstRound::Try;
            let Some(bound) = pacer.next_sleep(bound, subscription.is_confirmed())? else {
                return Ok(None);
            };
            // A message, a hand-off or the bound: either way, look again; a release the client
            // lets pass (another client's turn) only after a short wait for nothing else.
            // (Not raced with the shutdown signal, which would grow what every waiter keeps
            // while it sleeps: a shutdown wakes every waiter of the hub instead.)
            let mut woken = subscription.wait(bound).await;
            pacer.still_open()?;
            while let crate::pubsub::Woken::Deferred = woken {
                let Some(fallback) =
                    pacer.next_sleep(crate::pubsub::TURN_FALLBACK, subscription.is_confirmed())?
                else {
                    return Ok(None);
                };
                woken = subscription.wait(fallback).await;
                pacer.still_open()?;
            }
            if let crate::pubsub::Woken::Handed(grant) = woken
                && let Some(taken) = handed(spec, &mut accept, grant)
            {
                subscription.satisfied();
                return Ok(Some(taken));
            }
        }
    }
}

/// What one try of a polled wait ([`poll_wait`]) came to.
#[derive(Debug)]
pub enum Poll<T> {
    /// Done: the wait ends with this.
    Ready(T),
    /// Not yet: try again after this pause (never past the wait's deadline).
    After(Duration),
    /// Not, and waiting cannot change it before the deadline (a call that does not wait, or
    /// what it waits for comes back too late): the wait ends without it.
    GiveUp,
}

/// The wait of what no message announces (a spin lock's waiters, the rate limiter's window):
/// tries spaced by the pause each try answers, until one is [`Poll::Ready`], gives up or the
/// deadline passes (`Ok(None)`). `attempt` gets the try's number (0 for the first). The first
/// try's error is the call's, at once, and it is cut one response timeout after the deadline
/// ([`first_try`]); later tries follow the outage rule of every wait (`WaitPacer`), and a
/// shutdown ends the wait with [`Error::Closed`].
///
/// # Errors
///
/// As [`wait_for_turn`].
pub async fn poll_wait<T, F, Fut>(
    client: &crate::Client,
    deadline: Option<Instant>,
    mut attempt: F,
) -> Result<Option<T>>
where
    F: FnMut(u32) -> Fut,
    Fut: std::future::Future<Output = Result<Poll<T>>>,
{
    let mut pacer = WaitPacer::new(client, deadline);
    let mut n: u32 = 0;
    loop {
        let tried = if n == 0 {
            pacer.first_attempt(attempt(n)).await
        } else {
            pacer.attempt(attempt(n)).await
        };
        n = n.saturating_add(1);
        let pause = match tried? {
            Paced::Reached(Poll::Ready(value)) => return Ok(Some(value)),
            Paced::Reached(Poll::GiveUp) => return Ok(None),
            Paced::Reached(Poll::After(pause)) | Paced::Failed(pause) => pause,
        };
        if !pacer.rest(pause).await? {
            return Ok(None);
        }
    }
}

/// What a local releaser handed over, made the wait's output by `accept`. A claim delivers only
/// what the waiter takes (`Claim::deliver` checks its need), so `None` (a grant of something
/// else, given back as it drops) does not happen: the waiter would try again.
fn handed<T>(
    spec: &WaitSpec<'_>,
    accept: &mut impl FnMut(Taken) -> Option<T>,
    grant: Grant,
) -> Option<T> {
    if spec.need.as_ref().map(|need| need.takes) != Some(grant.takes()) {
        tracing::warn!(
            channel = spec.channel,
            "a local hand-off of something else than the waiter takes was given back"
        );
        return None;
    }
    accept(grant.accept())
}

/// The first try of a call with a wait bound `deadline`: cut, if no reply came, one response
/// timeout after the deadline (the longest a round trip may take), so that the call never
/// overruns its wait by more; an unknown outcome is then the caller's to undo (its cleanup
/// runs when the try is dropped), and the call fails with a connection error naming the
/// server. Without a deadline, the try runs as the client's retries take it.
///
/// # Errors
///
/// The try's error, or [`Error::Unreachable`] when it was cut.
pub async fn first_try<T>(
    client: &crate::Client,
    deadline: Option<Instant>,
    fut: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    let Some(deadline) = deadline else {
        return fut.await;
    };
    let patience = client.config().response_timeout();
    match tokio::time::timeout_at(crate::time::later(deadline, patience), fut).await {
        Ok(result) => result,
        Err(_) => Err(no_reply(client, patience)),
    }
}

/// A connection error for a call that got no reply within `within`, naming `client`'s server.
pub fn no_reply(client: &crate::Client, within: Duration) -> Error {
    Error::Unreachable {
        address: client.address().to_owned(),
        source: redis::RedisError::from(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no reply from redis within {within:?}"),
        )),
    }
}

/// A connection error for a wait whose subscriber connection to `client`'s server dropped.
pub(crate) fn connection_lost(client: &crate::Client) -> Error {
    Error::Unreachable {
        address: client.address().to_owned(),
        source: redis::RedisError::from(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "the subscriber connection dropped",
        )),
    }
}

/// What a try made through [`WaitPacer::attempt`] came to.
#[derive(Debug)]
pub enum Paced<T> {
    /// The try reached Redis, which answered `T`: any outage is over.
    Reached(T),
    /// The connection failed: try again after this pause (the outage goes on, within the
    /// client's outage limit).
    Failed(Duration),
}

/// The pace of a wait loop, and its one outage rule, which every waiting call follows (every
/// lock kind, both semaphores, the latch, the rate limiter, MultiLock and RedLock,
/// `wait_unlocked`):
///
/// - **Through an outage, up to the limit.** A try that fails on the connection starts an
///   outage (or continues one); the loop tries again with the retry policy's back-off, never
///   sleeping past the outage's start plus the client's `wait_outage_limit`. A try that
///   reaches Redis ends the outage.
/// - **Then the error.** Once the outage has lasted the limit, the call returns the last
///   connection error ([`Error::Unreachable`]). A try still in flight is cut one retry
///   interval (the policy's longest pause) after the limit, so the error comes within the
///   limit plus one retry interval of the outage's start.
/// - **The wait bound holds.** A try still in flight one response timeout after the call's
///   deadline is cut (its cleanup undoes what it may have done) and the call fails with a
///   connection error; a deadline that passes during an outage ends the call with the
///   connection error, not as a timeout: Redis was not reached, so nothing says the
///   synchronizer was taken.
/// - **Shutdown ends it.** A wait ends with [`Error::Closed`] when the client is shut down
///   (a shutdown wakes every waiter of the client's subscriber connection; a timer's sleep
///   goes through [`pause`](Self::pause)).
#[derive(Debug)]
pub struct WaitPacer<'c> {
    client: &'c crate::Client,
    deadline: Option<Instant>,
    outage_since: Option<Instant>,
    /// The outage's last error (boxed: a waiter keeps the pacer for as long as it waits).
    last_error: Option<Box<Error>>,
    failures: u32,
}

impl<'c> WaitPacer<'c> {
    /// A pacer for a wait of `client` that gives up at `deadline` (`None`: never).
    pub fn new(client: &'c crate::Client, deadline: Option<Instant>) -> Self {
        Self {
            client,
            deadline,
            outage_since: None,
            last_error: None,
            failures: 0,
        }
    }

    /// When the outage this wait is in began (`None`: none).
    pub fn outage_since(&self) -> Option<Instant> {
        self.outage_since
    }

    /// Counts an outage that began at `since` as this wait's (another waiter of the same
    /// synchronizer saw it first): the limit runs from then.
    pub fn seed_outage(&mut self, since: Instant) {
        self.outage_since = Some(self.outage_since.map_or(since, |s| s.min(since)));
    }

    /// The retry interval the outage limit allows a try beyond it: the retry policy's
    /// longest pause.
    fn retry_interval(&self) -> Duration {
        self.client.config().retry().backoff.max
    }

    /// Runs one try of the wait, bounded as the outage rule says: cut one retry interval
    /// after the outage limit (counted from this try's start when no outage is on), and one
    /// response timeout after the wait's deadline.
    ///
    /// # Errors
    ///
    /// The try's error when it is not a connection error; a connection error once the outage
    /// has lasted the limit, or when the try was cut.
    pub async fn attempt<T>(
        &mut self,
        fut: impl std::future::Future<Output = Result<T>>,
    ) -> Result<Paced<T>> {
        let config = self.client.config();
        let start = Instant::now();
        let outage_end = crate::time::later(
            self.outage_since.unwrap_or(start),
            config
                .wait_outage_limit()
                .saturating_add(self.retry_interval()),
        );
        let cap = match self.deadline {
            Some(d) => outage_end.min(crate::time::later(d, config.response_timeout())),
            None => outage_end,
        };
        match tokio::time::timeout_at(cap, fut).await {
            Ok(Ok(value)) => {
                self.reached();
                Ok(Paced::Reached(value))
            }
            Ok(Err(e)) => {
                if self.outage_since.is_none() && e.is_connection_error() {
                    self.outage_since = Some(start);
                }
                self.failed(e).map(Paced::Failed)
            }
            Err(_) => {
                self.outage_since.get_or_insert(start);
                let waited = Instant::now().saturating_duration_since(start);
                Err(self.outage_error(waited))
            }
        }
    }

    /// The wait's first try: its error is the call's, at once, and it is cut one response
    /// timeout after the deadline ([`first_try`]).
    ///
    /// # Errors
    ///
    /// As [`first_try`].
    pub async fn first_attempt<T>(
        &mut self,
        fut: impl std::future::Future<Output = Result<T>>,
    ) -> Result<Paced<T>> {
        first_try(self.client, self.deadline, fut)
            .await
            .map(Paced::Reached)
    }

    /// Sleeps `pause` before a polled wait's next try (nothing to miss a message on), bounded
    /// as [`next_sleep`](Self::next_sleep) says; `false` once the deadline has passed.
    ///
    /// # Errors
    ///
    /// As [`next_sleep`](Self::next_sleep), and [`Error::Closed`] once the client is shut
    /// down.
    pub async fn rest(&mut self, pause: Duration) -> Result<bool> {
        let Some(pause) = self.next_sleep(pause, true)? else {
            return Ok(false);
        };
        self.pause(tokio::time::sleep(pause)).await?;
        Ok(true)
    }

    /// A try reached Redis: any outage is over.
    pub fn reached(&mut self) {
        self.outage_since = None;
        self.last_error = None;
        self.failures = 0;
    }

    /// A try failed with `e` (made outside [`attempt`](Self::attempt): a compound round):
    /// the back-off before the next try while a connection outage has lasted less than the
    /// client's outage limit.
    ///
    /// # Errors
    ///
    /// `e` itself when it is not a connection error, or when the outage has lasted too long.
    pub fn failed(&mut self, e: Error) -> Result<Duration> {
        if !e.is_connection_error() {
            return Err(e);
        }
        let e = e.naming(self.client.address());
        let since = *self.outage_since.get_or_insert_with(Instant::now);
        if since.elapsed() >= self.client.config().wait_outage_limit() {
            tracing::debug!(error = %e, "redis unreachable for longer than the wait outage limit");
            return Err(e);
        }
        self.failures = self.failures.saturating_add(1);
        tracing::debug!(error = %e, failures = self.failures, "waiting through a redis outage");
        self.last_error = Some(Box::new(e));
        Ok(self.client.config().retry().pause(self.failures))
    }

    /// The error that ends a wait in an outage: the outage's last one, or one saying no reply
    /// came in `waited`.
    fn outage_error(&mut self, waited: Duration) -> Error {
        match self.last_error.take() {
            Some(e) => *e,
            None => no_reply(self.client, waited),
        }
    }

    /// How long to sleep before the next try: `bound`, at most a short re-check while the
    /// subscription is not `confirmed` (a message could be missed), never past the end of the
    /// outage limit (the last try comes then) nor the deadline; `None` once the deadline has
    /// passed.
    ///
    /// # Errors
    ///
    /// The outage's connection error when the deadline or the outage limit has passed during
    /// an outage.
    pub fn next_sleep(&mut self, bound: Duration, confirmed: bool) -> Result<Option<Duration>> {
        let now = Instant::now();
        let mut bound = if confirmed {
            bound
        } else {
            bound.min(UNCONFIRMED_RECHECK)
        };
        if let Some(since) = self.outage_since {
            let limit = self.client.config().wait_outage_limit();
            let end = crate::time::later(since, limit);
            if end <= now && self.failures > 0 {
                return Err(self.outage_error(limit));
            }
            bound = bound.min(end.saturating_duration_since(now));
        }
        match self.deadline {
            Some(deadline) => {
                let remaining = deadline.saturating_duration_since(now);
                if remaining.is_zero() {
                    return match self.outage_since {
                        Some(since) => Err(self.outage_error(now.saturating_duration_since(since))),
                        None => Ok(None),
                    };
                }
                Ok(Some(bound.min(remaining)))
            }
            None => Ok(Some(bound)),
        }
    }

    /// `Ok` unless the client was shut down: a waiter woken on the hub looks here.
    ///
    /// # Errors
    ///
    /// [`Error::Closed`] when the client is shut down.
    pub fn still_open(&self) -> Result<()> {
        if self.client.is_shut_down() {
            Err(crate::client::SHUT_DOWN)
        } else {
            Ok(())
        }
    }

    /// Awaits `sleep` (a timer, any wait off the client's subscriber connection) unless the
    /// client is shut down first.
    ///
    /// # Errors
    ///
    /// [`Error::Closed`] when the client is shut down.
    pub async fn pause<F: std::future::Future>(&self, sleep: F) -> Result<F::Output> {
        tokio::select! {
            biased;
            () = self.client.shut_down() => Err(crate::client::SHUT_DOWN),
            output = sleep => Ok(output),
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

/// Runs a call of a synchronizer outside the lock and permit engines (the latch's wait, the
/// rate limiter's acquire) as those engines run theirs: in a `ferrisson.acquire` span (`debug`)
/// with its kind, key, permits and wait limit, counted and timed by kind as an acquisition
/// (`Ok(Some(_))`), a timeout (`Ok(None)` with a wait) or neither.
pub fn observed<T, F, Fut>(
    client: &crate::Client,
    kind: &'static str,
    key: &str,
    permits: Option<u32>,
    wait: Option<Duration>,
    run: F,
) -> impl std::future::Future<Output = crate::error::Result<Option<T>>>
where
    F: FnOnce(std::sync::Arc<crate::metrics::Progress>) -> Fut,
    Fut: std::future::Future<Output = crate::error::Result<Option<T>>>,
{
    let span = tracing::debug_span!(
        "ferrisson.acquire",
        kind,
        key = %key,
        permits,
        wait_ms = wait.map(|w| u64::try_from(w.as_millis()).unwrap_or(u64::MAX)),
        attempts = tracing::field::Empty,
    );
    crate::metrics::acquisition(span, kind, client.metric_name(key), wait, run)
}
