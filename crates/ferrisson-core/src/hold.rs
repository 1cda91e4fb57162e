//! What every lock kind shares: the options of a lock call, the guard of a hold (loss signal,
//! fencing token, release on unlock or drop), and the helpers of their wait loops.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;

use crate::error::{Error, LossReason, Result};
use crate::owner::Owner;
use crate::script::Script;
use crate::watchdog::{LeaseEnd, LeaseHandle};
use tokio::time::Instant;

/// The watchdog's renewal script for locks held in a hash (`owner → count`): the reentrant
/// lock's and the fair lock's (`lua/core/renew_hash.lua`).
pub static RENEW_HASH: Script =
    Script::new("core/renew_hash", include_str!("../lua/renew_hash.lua"));

/// Force release of a lock kept in a hash, whoever holds it (`lua/core/force_release_hash.lua`):
/// the reentrant lock's (message `0`) and the read-write lock's (message `1`).
pub static FORCE_RELEASE_HASH: Script = Script::new(
    "core/force_release_hash",
    include_str!("../lua/force_release_hash.lua"),
);

/// Every script this crate runs, for tests and tools that load or check them.
pub fn scripts() -> [&'static Script; 4] {
    [
        &RENEW_HASH,
        &FORCE_RELEASE_HASH,
        &crate::permits::PERMITS_UPDATE,
        &crate::permits::PERMITS_LEAVE,
    ]
}

/// How long to wait for a lock, and how long to hold it.
///
/// ```
/// use std::time::Duration;
/// use ferrisson_core::LockOptions;
///
/// let options = LockOptions::new()
///     .wait(Duration::from_secs(2))
///     .lease(Duration::from_secs(10));
/// assert_eq!(options.wait_time(), Some(Duration::from_secs(2)));
/// assert_eq!(options.lease_time(), Some(Duration::from_secs(10)));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LockOptions {
    wait: Option<Duration>,
    lease: Option<Duration>,
}

impl LockOptions {
    /// Wait without a time limit; hold with the watchdog.
    pub fn new() -> Self {
        Self::default()
    }

    /// Give up after waiting this long (zero: try once).
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    /// Hold for this fixed lease, with no watchdog: the lock ends by itself when the lease runs
    /// out, and the guard's loss signal fires then. At least one millisecond.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease);
        self
    }

    /// The wait limit, if any.
    pub fn wait_time(&self) -> Option<Duration> {
        self.wait
    }

    /// The fixed lease, if any (`None`: the watchdog keeps the hold).
    pub fn lease_time(&self) -> Option<Duration> {
        self.lease
    }

    /// Checks the options: a fixed lease is at least one millisecond and at most
    /// [`MAX_LEASE`](crate::duration::MAX_LEASE). Any wait is valid (`Duration::MAX`: no limit).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] otherwise.
    pub fn validate(&self) -> Result<()> {
        match self.lease {
            Some(lease) => crate::duration::validate_lease("lease", lease),
            None => Ok(()),
        }
    }
}

/// What a release did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Released {
    /// The owner held nothing.
    NotOwner,
    /// Holds of the owner remain.
    StillHeld,
    /// The lock is free; a waiter was woken.
    Freed,
    /// The lock went straight to a local waiter.
    HandedOff,
}

/// How a lock kind releases one hold; the guard calls it on unlock and on drop.
pub trait Release: Send + Sync + 'static {
    /// The Redis key of the lock, for messages.
    fn key(&self) -> &str;

    /// Releases one hold of `owner`, whose lease has just ended locally as `end` says.
    fn release(
        self: Arc<Self>,
        owner: Owner,
        end: LeaseEnd,
    ) -> BoxFuture<'static, Result<Released>>;
}

/// One hold of a lock: of a [`ReentrantLock`], a fair lock, or either side of a read-write lock.
///
/// Release it with [`unlock`](Self::unlock) to learn the outcome. Dropping it releases the
/// hold in the background (never blocking); without a Tokio runtime to run that release, the
/// hold ends when its lease runs out, since the watchdog stops renewing it at once.
///
/// While held, watch [`lost`](Self::lost): it resolves if the hold cannot be kept, before the
/// lease can have run out on the server, so the holder can stop before another holder gets in.
///
/// [`ReentrantLock`]: https://docs.rs/ferrisson-lock
#[must_use = "dropping the guard releases the lock at once (in the background)"]
pub struct HoldGuard {
    lock: Arc<dyn Release>,
    owner: Owner,
    lease: Option<LeaseHandle>,
    token: Option<u64>,
}

impl std::fmt::Debug for HoldGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HoldGuard")
            .field("key", &self.lock.key())
            .field("owner", &self.owner)
            .field("token", &self.token)
            .field("lost", &self.loss_reason())
            .finish()
    }
}

impl HoldGuard {
    /// The guard of a hold just taken: `lease` is its registration with the watchdog.
    pub fn new(
        lock: Arc<dyn Release>,
        owner: Owner,
        lease: LeaseHandle,
        token: Option<u64>,
    ) -> Self {
        Self {
            lock,
            owner,
            lease: Some(lease),
            token,
        }
    }

    /// The fencing token of this acquisition (fenced locks and write locks): strictly greater
    /// than the token of every earlier acquisition of the lock, by any owner. Pass it to the
    /// protected resource, which rejects a write whose token is below the highest it has seen.
    pub fn token(&self) -> Option<u64> {
        self.token
    }

    /// The owner the hold is recorded under.
    pub fn owner(&self) -> &Owner {
        &self.owner
    }

    /// The Redis key of the lock.
    pub fn key(&self) -> &str {
        self.lock.key()
    }

    /// Why the hold was lost, or `None` while it is held.
    pub fn loss_reason(&self) -> Option<LossReason> {
        self.lease.as_ref().and_then(LeaseHandle::lost_reason)
    }

    /// Whether the hold was lost.
    pub fn is_lost(&self) -> bool {
        self.loss_reason().is_some()
    }

    /// `Ok(())` while the hold is believed held; [`Error::LeaseLost`] once it is lost.
    /// Call it before each step that must run under the lock.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] with the reason.
    pub fn ensure_held(&self) -> Result<()> {
        match self.loss_reason() {
            Some(reason) => Err(Error::LeaseLost(reason)),
            None => Ok(()),
        }
    }

    /// Resolves when the hold is lost, with the reason; pending while it is held. Use it in a
    /// `tokio::select!` beside the work the lock protects.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only observes.
    pub async fn lost(&self) -> LossReason {
        match &self.lease {
            Some(lease) => lease.lost().await,
            None => std::future::pending().await,
        }
    }

    /// Runs `work` only while the hold lasts: its output, or [`Error::LeaseLost`] with the
    /// reason as soon as the hold is lost (then `work` is dropped at its next await point, before
    /// the lease can have run out on the server). The `select!` on [`lost`](Self::lost) that
    /// protected work needs, written once.
    ///
    /// ```
    /// use ferrisson_core::{HoldGuard, Result};
    ///
    /// async fn post_entry(guard: &HoldGuard) -> Result<u64> {
    ///     // Cut off with `Error::LeaseLost` if the lock goes while the write runs.
    ///     guard.while_held(async { /* the protected write */ 42 }).await
    /// }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// As cancel safe as `work`: dropping this future drops `work`; the hold stays.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] when the hold was lost before or while `work` ran.
    pub async fn while_held<F: std::future::Future>(&self, work: F) -> Result<F::Output> {
        self.ensure_held()?;
        tokio::select! {
            biased;
            reason = self.lost() => Err(Error::LeaseLost(reason)),
            output = work => Ok(output),
        }
    }

    /// The earliest moment the lease can end on the server as known now (the watchdog moves it
    /// forward with each renewal); `None` once lost.
    pub fn lease_deadline(&self) -> Option<Instant> {
        self.lease.as_ref().and_then(LeaseHandle::deadline)
    }

    /// Releases this hold (one level of re-entry), waking a waiter when the lock becomes free.
    ///
    /// # Cancel safety
    ///
    /// Dropping this future does not undo the unlock: a release that may have been sent is
    /// sent again in the background with the same request id (Redis counts it once), and one
    /// that was not sent yet is sent then.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] when the hold had been lost before (whatever Redis said then: the
    /// lock was not held continuously), [`Error::NotOwner`] when Redis says this owner holds
    /// nothing, [`Error::Redis`] when Redis could not be reached (the hold then ends with its
    /// lease: the watchdog no longer renews it).
    pub async fn unlock(mut self) -> Result<()> {
        let Some(lease) = self.lease.take() else {
            return Ok(());
        };
        // Leave the watchdog first, so it does not renew a hold being released.
        let end = lease.end();
        let released = self.lock.clone().release(self.owner.clone(), end).await?;
        match (released, end.lost) {
            (_, Some(reason)) => Err(Error::LeaseLost(reason)),
            (Released::NotOwner, None) => Err(Error::NotOwner(format!(
                "`{}` is not held by {}",
                self.lock.key(),
                self.owner
            ))),
            (_, None) => Ok(()),
        }
    }
}

impl HoldGuard {
    /// Lets go of the guard without releasing the hold: the watchdog stops renewing it, and
    /// it ends when its lease runs out, or when someone releases it explicitly (a permit by
    /// its id). Nothing is sent to Redis.
    pub fn detach(mut self) {
        if let Some(lease) = self.lease.take() {
            lease.end();
        }
    }
}

impl Drop for HoldGuard {
    fn drop(&mut self) {
        let Some(lease) = self.lease.take() else {
            return;
        };
        let end = lease.end();
        let release = self.lock.clone().release(self.owner.clone(), end);
        let key = self.lock.key().to_owned();
        let owner = self.owner.clone();
        let spawned = spawn_cleanup(async move {
            if let Err(e) = release.await {
                tracing::warn!(%key, %owner, error = %e, "background unlock failed; the hold ends with its lease");
            }
        });
        if !spawned {
            tracing::warn!(
                key = %self.lock.key(),
                owner = %self.owner,
                "lock guard dropped outside a Tokio runtime; the hold ends with its lease"
            );
        }
    }
}

/// Runs a cleanup in the background from a `Drop`, on the current Tokio runtime; returns
/// false (nothing runs) outside one: the hold then ends with its lease.
pub fn spawn_cleanup(cleanup: impl std::future::Future<Output = ()> + Send + 'static) -> bool {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            runtime.spawn(cleanup);
            true
        }
        Err(_) => false,
    }
}

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

/// A cleanup that runs in the background (see [`spawn_cleanup`]) if the guard is dropped
/// armed: what a cancelled call must undo (a hold an abandoned acquire may have taken, a queue
/// place, a release to send again). [`disarm`](Self::disarm) once the call has completed.
pub struct CleanupGuard<F, Fut>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    cleanup: Option<F>,
}

impl<F, Fut> CleanupGuard<F, Fut>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    /// Armed with `cleanup`, which builds the future to run.
    pub fn new(cleanup: F) -> Self {
        Self {
            cleanup: Some(cleanup),
        }
    }

    /// The call completed: nothing to clean up.
    pub fn disarm(mut self) {
        self.cleanup = None;
    }

    /// The call whose result is `result` has ended: disarmed when its outcome is known (a
    /// reply arrived, or Redis refused the call), left to run the cleanup now when it is not
    /// (a connection error after the call may have run, past [`Client::settle`]'s window):
    /// an unknown outcome is undone, never taken for a failure that changed nothing.
    ///
    /// [`Client::settle`]: crate::Client::settle
    pub fn settle<T>(self, result: &Result<T>) {
        match result {
            Err(e) if e.is_connection_error() => {
                tracing::debug!(error = %e, "the call's outcome is unknown: undoing what it may have done");
                drop(self);
            }
            _ => self.disarm(),
        }
    }
}

impl<F, Fut> Drop for CleanupGuard<F, Fut>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    fn drop(&mut self) {
        if let Some(cleanup) = self.cleanup.take()
            && !spawn_cleanup(cleanup())
        {
            tracing::warn!(
                "a cancelled call could not clean up outside a Tokio runtime; what it held ends with its lease"
            );
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
    pub tag: Option<crate::Tag>,
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
    let config = client.config();
    let subscription = client.subscribe(spec.channel, spec.policy, spec.tag.clone());
    let confirm_within = match spec.deadline {
        Some(d) => d.saturating_duration_since(Instant::now()),
        None => config.response_timeout_duration(),
    };
    Box::pin(subscription.confirmed(confirm_within.min(config.response_timeout_duration()))).await;
    wait_on(client, &subscription, &spec, FirstRound::Try, attempt).await
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
pub fn register_early(client: &crate::Client, spec: &WaitSpec<'_>) -> Option<crate::Subscription> {
    client.subscribe_if_live(spec.channel, spec.policy, || spec.tag.clone())
}

/// How a call that may wait starts ([`begin_wait`]).
#[derive(Debug)]
pub enum Start<T> {
    /// Done without waiting: taken (`Some`) or, for a call that does not wait, not (`None`).
    Done(Option<T>),
    /// To wait, registered early or not: hand this to [`wait_registered`].
    Wait(Option<crate::Subscription>),
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

/// Waits as [`wait_for_turn`] does, for a caller registered early ([`register_early`]) or not.
/// Registered early, its first try is made here, in the loop, so that a local releaser cannot
/// hand it anything while that try is in flight (an error of that try is returned at once, as
/// the first try's error of any caller); not registered, it has tried once already, and this
/// subscribes and tries again.
///
/// # Errors
///
/// As [`wait_for_turn`].
pub async fn wait_registered<T, F, Fut>(
    client: &crate::Client,
    early: Option<&crate::Subscription>,
    spec: WaitSpec<'_>,
    attempt: F,
) -> Result<Option<T>>
where
    T: Send + 'static,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Attempt<T>>>,
{
    match early {
        Some(subscription) => {
            wait_on(client, subscription, &spec, FirstRound::FirstTry, attempt).await
        }
        None => wait_for_turn(client, spec, attempt).await,
    }
}

/// The loop of [`wait_for_turn`] on a subscription the caller made (and confirmed) itself:
/// tries (unless `first` is [`FirstRound::Sleep`]: the first round only sleeps, for a waiter that queued
/// behind others without trying), takes a hand-off when one arrives, and sleeps until a
/// message, the TTL the last try returned or `spec.recheck`.
///
/// # Errors
///
/// As [`wait_for_turn`].
pub async fn wait_on<T, F, Fut>(
    client: &crate::Client,
    subscription: &crate::Subscription,
    spec: &WaitSpec<'_>,
    mut first: FirstRound,
    mut attempt: F,
) -> Result<Option<T>>
where
    T: Send + 'static,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Attempt<T>>>,
{
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
                Err(None) => config.response_timeout_duration(),
                Ok(trying) => {
                    let result = attempt().await;
                    drop(trying);
                    match result {
                        Ok(Attempt::Acquired(taken)) => {
                            subscription.satisfied();
                            return Ok(Some(taken));
                        }
                        Ok(Attempt::Held(ttl)) => {
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
        // A message, a hand-off or the bound: either way, look again.
        if let crate::Woken::Handed(handoff) = subscription.wait(bound).await {
            subscription.satisfied();
            return handed(handoff).map(Some);
        }
    }
}

/// What a local releaser handed over, as the type the waiter waits for.
fn handed<T: 'static>(handoff: crate::Handoff) -> Result<T> {
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
        if since.elapsed() > config.outage_limit() {
            return Err(e);
        }
        self.failures += 1;
        tracing::debug!(error = %e, failures = self.failures, "waiting through a redis outage");
        Ok(config.retry_policy().backoff(self.failures))
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
