//! The wait loop every waiting call shares: register (early when the channel is live), try,
//! sleep until a message, a hand-off, the TTL the try returned or a re-check, through outages
//! and up to a deadline.

use std::time::Duration;

use crate::drive::{Between, Pace, Rounds, drive};
use crate::error::Result;
use crate::grant::Grant;
use crate::guard::HoldGuard;
pub(crate) use crate::pacer::connection_lost;
pub use crate::pacer::{WaitPacer, first_try, no_reply};
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
    /// What the waiter waits for, as bits a [`Wake::Matching`](crate::pubsub::Wake::Matching)
    /// message must share to wake it (`u64::MAX`: every release may be for it).
    pub interest: u64,
    /// A waiter that may arm tracking ([`ClientConfig::with_tracked_waits`](crate::ClientConfig::with_tracked_waits)): set while its last try did, so
    /// that Redis tells it of the key's next change; its re-check is then
    /// [`TRACKED_RECHECK`](crate::TRACKED_RECHECK), a net, not `recheck`.
    pub armed: Option<&'a crate::tracking::Tracked>,
}

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
    F: FnMut() -> Fut + Send,
    Fut: std::future::Future<Output = Result<Attempt<T>>> + Send,
{
    wait_handed(client, spec, attempt, |_| None).await
}

/// As [`wait_for_turn`], for a waiter a local releaser may hand what it waits for
/// (`spec.need`): `accept` makes what was handed over (a [`Grant`]) the wait's output, as a
/// taken try's reply is made one.
///
/// # Errors
///
/// As [`wait_for_turn`].
pub async fn wait_handed<T, F, Fut>(
    client: &crate::Client,
    spec: WaitSpec<'_>,
    attempt: F,
    accept: impl FnMut(Grant) -> Option<T> + Send,
) -> Result<Option<T>>
where
    T: Send + 'static,
    F: FnMut() -> Fut + Send,
    Fut: std::future::Future<Output = Result<Attempt<T>>> + Send,
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
    subscription.set_interest(spec.interest);
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
    let early = client
        .hub()
        .subscribe_if_live(spec.channel, spec.policy, || spec.need.clone())?;
    early.set_interest(spec.interest);
    Some(early)
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
    accept: impl FnMut(Grant) -> Option<T> + Send,
) -> Result<Option<T>>
where
    T: Send + 'static,
    F: FnMut() -> Fut + Send,
    Fut: std::future::Future<Output = Result<Attempt<T>>> + Send,
{
    match early {
        Some((subscription, first)) => {
            wait_on(client, subscription, &spec, first, attempt, accept).await
        }
        None => wait_handed(client, spec, attempt, accept).await,
    }
}

/// The wait of [`wait_for_turn`] on a subscription the caller made (and confirmed) itself, in
/// the one driver ([`drive`]): tries (unless `first` is [`FirstRound::Sleep`]: the first
/// round only sleeps, for a waiter that queued behind others without trying), takes a
/// hand-off when one arrives (made the output by `accept`), and sleeps until a message, the
/// TTL the last try returned or `spec.recheck`.
///
/// A function returning an `async` block: an `async fn` would keep its parameters beside the
/// copies its body makes of them for as long as the waiter waits.
///
/// # Errors
///
/// As [`wait_for_turn`], and [`Error::Closed`](crate::Error::Closed) once the client is shut down.
#[allow(
    clippy::manual_async_fn,
    reason = "an async fn stores its parameters twice, for as long as the waiter waits"
)]
pub fn wait_on<T, F, Fut>(
    client: &crate::Client,
    subscription: &crate::pubsub::Subscription,
    spec: &WaitSpec<'_>,
    first: FirstRound,
    attempt: F,
    accept: impl FnMut(Grant) -> Option<T> + Send,
) -> impl std::future::Future<Output = Result<Option<T>>>
where
    T: Send + 'static,
    F: FnMut() -> Fut + Send,
    Fut: std::future::Future<Output = Result<Attempt<T>>> + Send,
{
    async move {
        let waiter = Subscribed {
            subscription,
            spec,
            first,
            attempt,
            accept,
            vain: 0,
            bound: Duration::ZERO,
            timed_out: false,
            tracking: client.tracking(),
            claimed: client.config().response_timeout(),
            output: std::marker::PhantomData,
        };
        drive(client, spec.deadline, false, waiter).await
    }
}

/// A waiter on a channel, as [`drive`] drives it ([`wait_on`]).
struct Subscribed<'s, 'w, T, F, A> {
    subscription: &'s crate::pubsub::Subscription,
    spec: &'s WaitSpec<'w>,
    first: FirstRound,
    attempt: F,
    accept: A,
    /// Tries in vain so far: the re-check grows with them (`spec.recheck`).
    vain: u32,
    /// The longest sleep before the next try, from the last round.
    bound: Duration,
    /// Whether the last sleep ended at its bound, woken by nothing.
    timed_out: bool,
    /// The client's tracking, which counts the tracked waits a wake-up missed.
    tracking: &'s crate::tracking::Tracking,
    /// How long a claimed waiter waits for its hand-off before it looks again: one response
    /// timeout.
    claimed: Duration,
    output: std::marker::PhantomData<fn() -> T>,
}

impl<T, F, Fut, A> Rounds for Subscribed<'_, '_, T, F, A>
where
    T: Send + 'static,
    F: FnMut() -> Fut + Send,
    Fut: std::future::Future<Output = Result<Attempt<T>>> + Send,
    A: FnMut(Grant) -> Option<T> + Send,
{
    type Output = T;

    fn pace(&self, _n: u32) -> Pace {
        if self.first == FirstRound::FirstTry {
            // The call's very first try: its error is the call's, at once.
            Pace::First
        } else {
            Pace::Paced
        }
    }

    async fn round(
        &mut self,
        _n: u32,
        _started: Instant,
        _deadline: Option<Instant>,
    ) -> Result<Option<T>> {
        let recheck = self.spec.recheck.delay(self.vain);
        let first = std::mem::replace(&mut self.first, FirstRound::Try);
        if first == FirstRound::Sleep {
            // Queued without a try: nothing is known, so re-check once a `recheck` at most.
            self.bound = recheck;
            return Ok(None);
        }
        let subscription = self.subscription;
        match subscription.begin_try() {
            Err(Some(grant)) => match handed(self.spec, &mut self.accept, grant) {
                Some(taken) => {
                    subscription.satisfied();
                    Ok(Some(taken))
                }
                None => {
                    self.bound = Duration::ZERO;
                    Ok(None)
                }
            },
            // A local releaser claimed this waiter: what it waits for (or a wake-up, if the
            // hand-off fails) is on its way; trying now could take it twice.
            Err(None) => {
                self.bound = self.claimed;
                Ok(None)
            }
            Ok(trying) => {
                let armed = |spec: &WaitSpec<'_>| spec.armed.is_some_and(|a| a.armed());
                // A tracked wait that only its net ended: was a wake-up missed?
                let net = std::mem::take(&mut self.timed_out) && armed(self.spec);
                let result = (self.attempt)().await;
                drop(trying);
                match result? {
                    Attempt::Acquired(taken) => {
                        if net {
                            self.tracking.missed();
                        }
                        subscription.satisfied();
                        Ok(Some(taken))
                    }
                    Attempt::Held(ttl) => {
                        subscription.tried_in_vain();
                        self.vain = self.vain.saturating_add(1);
                        // Tracked, Redis tells the waiter of the key's next change: the
                        // re-check is only the net for a wake-up lost with a connection.
                        let recheck = if armed(self.spec) {
                            crate::TRACKED_RECHECK
                        } else {
                            recheck
                        };
                        self.bound = ttl_bound(ttl, recheck).min(recheck);
                        Ok(None)
                    }
                }
            }
        }
    }

    async fn between(
        &mut self,
        _n: u32,
        failed: Option<Duration>,
        pacer: &mut WaitPacer<'_>,
    ) -> Result<Between<T>> {
        let subscription = self.subscription;
        let bound = failed.unwrap_or(self.bound);
        let Some(bound) = pacer.next_sleep(bound, subscription.is_confirmed())? else {
            return Ok(Between::TimedOut);
        };
        // A message, a hand-off or the bound: either way, look again; a release the client
        // lets pass (another client's turn) only after a short wait for nothing else.
        // (Not raced with the shutdown signal, which would grow what every waiter keeps
        // while it sleeps: a shutdown wakes every waiter of the hub instead.)
        let mut woken = subscription.wait(bound).await;
        self.timed_out = matches!(woken, crate::pubsub::Woken::TimedOut);
        pacer.still_open()?;
        loop {
            use crate::pubsub::Woken;
            // Whether to sleep again, and for how long, before looking.
            let (again, fallback) = match woken {
                // A release the client lets pass: a try only if nothing else wakes it soon.
                Woken::Deferred => (crate::pubsub::TURN_FALLBACK, true),
                // Another client's waiter took it: asleep until the next release (or the
                // bound), as after a try in vain.
                Woken::Taken => (bound, false),
                // A lock waiter queued behind another waiter of its client is served through
                // that one (a release hands the lock on, a head that leaves unserved wakes the
                // next, a message wakes the head first): its bound passing is no reason to
                // look. Only the head re-checks Redis, so a long local queue does not poll it
                // once per waiter.
                Woken::TimedOut if self.queued_behind() => (bound, false),
                _ => break,
            };
            let Some(sleep) = pacer.next_sleep(again, subscription.is_confirmed())? else {
                return Ok(Between::TimedOut);
            };
            woken = if fallback {
                subscription.wait_fallback(sleep).await
            } else {
                let woken = subscription.wait(sleep).await;
                self.timed_out = matches!(woken, Woken::TimedOut);
                woken
            };
            pacer.still_open()?;
        }
        if let crate::pubsub::Woken::Handed(grant) = woken
            && let Some(taken) = handed(self.spec, &mut self.accept, grant)
        {
            subscription.satisfied();
            return Ok(Between::Ready(taken));
        }
        Ok(Between::Again)
    }
}

impl<T, F, A> Subscribed<'_, '_, T, F, A> {
    /// Whether this waiter waits for a lock (its hold, handed on by local releases) behind
    /// another local waiter, on a confirmed subscription (an unconfirmed one may miss
    /// messages: then every waiter looks for itself).
    fn queued_behind(&self) -> bool {
        self.spec
            .need
            .as_ref()
            .is_some_and(|need| need.takes == crate::pubsub::Takes::Hold)
            && self.subscription.is_confirmed()
            && self.subscription.behind_others()
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
/// shutdown ends the wait with [`Error::Closed`](crate::Error::Closed).
///
/// # Errors
///
/// As [`wait_for_turn`].
pub async fn poll_wait<T, F, Fut>(
    client: &crate::Client,
    deadline: Option<Instant>,
    attempt: F,
) -> Result<Option<T>>
where
    T: Send,
    F: FnMut(u32) -> Fut + Send,
    Fut: std::future::Future<Output = Result<Poll<T>>> + Send,
{
    let waiter = Polled {
        attempt,
        pause: Duration::ZERO,
        give_up: false,
        output: std::marker::PhantomData,
    };
    drive(client, deadline, false, waiter).await
}

/// A polled wait, as [`drive`] drives it ([`poll_wait`]).
struct Polled<T, F> {
    attempt: F,
    /// The pause the last try answered.
    pause: Duration,
    /// The last try answered [`Poll::GiveUp`].
    give_up: bool,
    output: std::marker::PhantomData<fn() -> T>,
}

impl<T, F, Fut> Rounds for Polled<T, F>
where
    T: Send,
    F: FnMut(u32) -> Fut + Send,
    Fut: std::future::Future<Output = Result<Poll<T>>> + Send,
{
    type Output = T;

    async fn round(
        &mut self,
        n: u32,
        _started: Instant,
        _deadline: Option<Instant>,
    ) -> Result<Option<T>> {
        Ok(match (self.attempt)(n).await? {
            Poll::Ready(value) => Some(value),
            Poll::After(pause) => {
                self.pause = pause;
                None
            }
            Poll::GiveUp => {
                self.give_up = true;
                None
            }
        })
    }

    async fn between(
        &mut self,
        _n: u32,
        failed: Option<Duration>,
        pacer: &mut WaitPacer<'_>,
    ) -> Result<Between<T>> {
        if self.give_up && failed.is_none() {
            return Ok(Between::TimedOut);
        }
        Ok(if pacer.rest(failed.unwrap_or(self.pause)).await? {
            Between::Again
        } else {
            Between::TimedOut
        })
    }
}

/// What a local releaser handed over, made the wait's output by `accept`. A claim delivers only
/// what the waiter takes (`Claim::deliver` checks its need), so `None` (a grant of something
/// else, given back as it drops) does not happen: the waiter would try again.
fn handed<T>(
    spec: &WaitSpec<'_>,
    accept: &mut impl FnMut(Grant) -> Option<T>,
    grant: Grant,
) -> Option<T> {
    if spec.need.as_ref().map(|need| need.takes) != Some(grant.takes()) {
        tracing::warn!(
            channel = spec.channel,
            "a local hand-off of something else than the waiter takes was given back"
        );
        return None;
    }
    accept(grant)
}

/// What one acquire script call did.
pub enum Attempt<T = HoldGuard> {
    /// The hold (or the permits) was taken.
    Acquired(T),
    /// Not taken; the TTL the script returned (the lock's remaining lease, negative when it
    /// has none).
    Held(i64),
}
