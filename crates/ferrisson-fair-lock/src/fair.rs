//! The fair lock.

use std::sync::Arc;
use std::time::Duration;

use std::borrow::Cow;

use futures::future::BoxFuture;

use ferrisson_core::__engine::keys::prefixed;
use ferrisson_core::__engine::{
    ClientEngine, HoldKind, LockHandle, LockKind, LockNames, LockType, RENEW_HASH, ReleaseArgs,
    Script, ScriptCall, TryArgs, Waiting, Wake,
};
use ferrisson_core::__engine::{KeyShape, ObjectKeys};
use ferrisson_core::{Backoff, Client, Error, Owner, Result};

use crate::scripts::{ACQUIRE, FORCE_RELEASE, LEAVE, RELEASE};
#[cfg(doc)]
use ferrisson_core::{HoldGuard, Lock};

/// The waiter timeout when none is given: a waiter that stops calling (its process died) is
/// dropped from the queue at most this long after its last call.
pub const DEFAULT_WAITER_TIMEOUT: Duration = Duration::from_secs(5);

/// Redisson's `RedissonFairLock` thread wait time (its default): the step of the waiter
/// timeouts it chains in `redisson_lock_timeout:{name}` (a `tryLock` with a wait steps by its
/// wait instead). ferrisson keeps those timeouts with the same arithmetic, so that Redisson and
/// ferrisson waiters can share one queue.
pub const REDISSON_THREAD_WAIT: Duration = Duration::from_secs(300);

/// The step of Redisson's queue arithmetic for a call (Redisson's `RedissonFairLock`): a
/// `tryLock` with a wait uses its wait, every other call [`REDISSON_THREAD_WAIT`]. A waiter's
/// timeout in the queue is the last waiter's (or now + the lock's TTL) plus this step, and an
/// acquisition from the queue, or a waiter leaving it, brings the timeouts behind closer by it.
fn thread_wait(wait_limit: Option<Duration>) -> Duration {
    match wait_limit {
        // Capped where the queue's scores (doubles, epoch ms) still count whole milliseconds.
        Some(wait) if limited(wait_limit) => wait.min(Duration::from_millis(1 << 50)),
        _ => REDISSON_THREAD_WAIT,
    }
}

/// Whether a call is a try with a wait (which leaves the queue once its wait is over).
fn limited(wait_limit: Option<Duration>) -> bool {
    wait_limit.is_some_and(|wait| !wait.is_zero())
}

/// The shortest waiter timeout accepted.
const MIN_WAITER_TIMEOUT: Duration = Duration::from_millis(100);

/// A fair distributed lock with Redisson's `RFairLock` semantics and Redis layout: waiters of
/// every client take the lock in the order they queued.
///
/// Everything else is as for the reentrant lock (`ferrisson-lock`): exclusive per acquisition
/// and reentrant per explicit [`Owner`] ([`owned_by`](Self::owned_by)), held under a lease the client's
/// watchdog renews (or a fixed one), a [loss signal](HoldGuard::lost) that fires before the
/// lease can have run out on the server, and fencing tokens with [`fenced`](Self::fenced).
///
/// - **Strict FIFO.** The queue lives in Redis: a release wakes only the head waiter, on its
///   own channel, and nobody else can take the lock while a live waiter is ahead of them
///   ([`try_lock`](Lock::try_lock) included).
/// - **Dead waiters cost seconds, not minutes.** A waiter keeps its place alive by calling
///   again every quarter of the [waiter timeout](Self::with_waiter_timeout) (5 s by default);
///   one whose process died is dropped when it reaches the head, at most one waiter timeout
///   after its last call, by the next call of a ferrisson client (Redisson clients drop it by
///   their own rule, up to 5 minutes per place). A live waiter is never dropped however long
///   the lock is held.
/// - **Leaving is immediate.** A waiter that gives up (wait limit reached, future dropped)
///   leaves the queue at once.
/// - **Redisson waiters share the queue.** Waiter timeouts follow Redisson's own arithmetic
///   ([`REDISSON_THREAD_WAIT`]), and the queue keys never expire (as in Redisson), so a queue
///   of Redisson and ferrisson waiters is served in order and neither side strands the other.
/// - **Redis time grows with the queue.** Each acquisition from the queue moves every queued
///   waiter's timeout up a place (Redisson's arithmetic, which Redisson's own fair lock pays
///   too): on the bench machine Redis spent 230–250 µs per acquisition with 64 waiters
///   queued and 600 µs with 512, against under 10 µs for the reentrant lock. A fair lock suits
///   queues of tens to hundreds of waiters; for thousands, or where throughput matters more
///   than strict order, the reentrant lock (FIFO among one client's waiters) costs Redis
///   nothing per waiter.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = ferrisson_testkit::RedisServer::spawn();
/// # let client = ferrisson_core::Client::connect(&server.url()).await?;
/// use std::time::Duration;
/// use ferrisson_fair_lock::{FairLock, Lock};
///
/// let lock = FairLock::new(&client, "payouts")?.with_waiter_timeout(Duration::from_secs(2))?;
/// let guard = lock.lock().await?;
/// assert!(lock.is_locked().await?);
/// assert_eq!(lock.owned_by(guard.owner().clone()).hold_count().await?, 1);
/// guard.unlock().await?;
/// assert!(!lock.is_locked().await?);
/// # Ok(()) }
/// ```
///
/// # Waiting
///
/// The caller joins the queue in Redis, subscribes to its own channel and sleeps until the
/// release before it wakes it (or a quarter of the waiter timeout passes: then it calls again,
/// which keeps its place alive and drops dead waiters ahead of it). When a wait limit passes,
/// the caller has left the queue by the time the call returns; dropped while waiting, it
/// leaves in the background at once (and wakes the next waiter if it was the head of a free
/// lock). `try_lock` takes the lock only if it is free and nobody is queued ahead, without
/// joining the queue.
///
/// # Keys
///
/// The hash, the queue, Redisson's waiter deadlines and this library's liveness deadlines (an
/// expiry and a delete cover all four), and the fencing counter (deleted with the lock, never
/// expired). A delete sends no message: each waiter has a channel of its own, and every live
/// waiter calls again within a quarter of the waiter timeout, joining the queue anew.
#[derive(Clone, Debug)]
pub struct FairLock(LockHandle<FairShared>);

/// The fair lock's keys and settings, as the engine's kind.
#[derive(Clone)]
pub struct FairShared {
    names: LockNames,
    queue: String,
    timeouts: String,
    /// Liveness deadlines of this library's waiters **\[ext\]**, `suffixed(key, "alive")`.
    alive: String,
    channel_prefix: String,
    token_key: String,
    waiter_timeout: Duration,
    /// Whether an owner that holds the lock takes it again (else its acquisition is refused:
    /// [`NonReentrantFairLock`](crate::NonReentrantFairLock)).
    reentrant: bool,
}

impl std::ops::Deref for FairShared {
    type Target = LockNames;

    fn deref(&self) -> &LockNames {
        &self.names
    }
}

impl FairLock {
    /// A handle to the fair lock named `name` (after the client's namespace prefix).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when `name` is empty.
    pub fn new(client: &Client, name: &str) -> Result<Self> {
        Self::build(client, name, false)
    }

    /// A handle to the fair lock named `name` that hands out fencing tokens: every
    /// acquisition, re-entries included, increments `redisson_lock_token:{name}`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when `name` is empty.
    pub fn fenced(client: &Client, name: &str) -> Result<Self> {
        Self::build(client, name, true)
    }

    pub(crate) fn build(client: &Client, name: &str, fenced: bool) -> Result<Self> {
        let names = LockNames::new(client, name, fenced, true)?;
        let key = &names.key;
        Ok(Self(LockHandle::new(FairShared {
            queue: prefixed("redisson_lock_queue", key),
            timeouts: prefixed("redisson_lock_timeout", key),
            alive: ferrisson_core::__engine::keys::suffixed(key, "alive"),
            channel_prefix: prefixed("redisson_lock__channel", key),
            token_key: prefixed("redisson_lock_token", key),
            names,
            waiter_timeout: DEFAULT_WAITER_TIMEOUT,
            reentrant: true,
        })))
    }

    /// This lock with re-entry refused (the script's flag "n").
    pub(crate) fn non_reentrant(&self) -> Self {
        let mut shared = (**self.0.kind()).clone();
        shared.reentrant = false;
        Self(self.0.with_kind(shared))
    }

    /// This lock with another waiter timeout: how long after its last call a queued waiter
    /// counts as dead. Waiters call again every quarter of it, so a shorter timeout drops dead
    /// waiters sooner and costs more calls while waiting. Every client of one lock should use
    /// the same timeout.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] under 100 ms.
    pub fn with_waiter_timeout(&self, timeout: Duration) -> Result<Self> {
        if timeout < MIN_WAITER_TIMEOUT {
            return Err(Error::InvalidArgument(format!(
                "waiter timeout must be at least {MIN_WAITER_TIMEOUT:?}, got {timeout:?}"
            )));
        }
        let mut shared = (**self.0.kind()).clone();
        shared.waiter_timeout = timeout;
        Ok(Self(self.0.with_kind(shared)))
    }

    /// This lock, acquired and queried as `owner` instead of a fresh owner per acquisition:
    /// the same owner re-enters.
    pub fn owned_by(&self, owner: Owner) -> Self {
        Self(self.0.owned_by(owner))
    }

    /// Whether acquisitions hand out fencing tokens.
    pub fn is_fenced(&self) -> bool {
        self.0.kind().fenced
    }

    /// The waiter timeout.
    pub fn waiter_timeout(&self) -> Duration {
        self.0.kind().waiter_timeout
    }

    /// How many waiters are queued (live or not yet found dead).
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`], [`Error::Redis`].
    pub async fn queue_length(&self) -> Result<usize> {
        let shared = self.0.kind();
        shared
            .client
            .query(redis::cmd("LLEN").arg(&shared.queue))
            .await
    }
}

impl LockType for FairLock {
    type Kind = FairShared;

    fn handle(&self) -> &LockHandle<FairShared> {
        &self.0
    }
}

impl LockKind for FairShared {
    async fn force_unlock(&self) -> Result<bool> {
        let call = ScriptCall::new(
            &FORCE_RELEASE,
            &[&self.key, &self.queue, &self.channel_prefix],
        )
        .arg(self.client.config().publish_command().as_str());
        let released: i64 = self.client.eval(&call).await?;
        Ok(released == 1)
    }

    fn object_keys(&self) -> ObjectKeys<'_> {
        ObjectKeys::new(
            &self.client,
            KeyShape::Lock,
            vec![&self.key, &self.queue, &self.timeouts, &self.alive],
        )
        .with_counters(vec![&self.token_key])
    }

    /// The channel prefix itself: a release by this library frees the lock with a message
    /// there too **\[ext\]** (no waiter listens on it), for the lock's watchers.
    fn release_channel(&self) -> Option<&str> {
        Some(&self.channel_prefix)
    }

    /// A release by a Redisson client wakes the head waiter alone: watchers look again once a
    /// second.
    fn watch_recheck(&self) -> Option<Duration> {
        Some(ferrisson_core::__engine::WATCH_RECHECK)
    }
}

impl FairShared {
    /// How often a waiter calls again to keep its place alive.
    fn heartbeat(&self) -> Duration {
        self.waiter_timeout / 4
    }

    /// Leaves the queue (idempotent, so retried: a resend finds the owner gone and moves
    /// nobody up).
    async fn leave(&self, owner: &Owner, wait_limit: Option<Duration>) -> Result<()> {
        let call = ScriptCall::new(
            &LEAVE,
            &[
                &self.key,
                &self.queue,
                &self.timeouts,
                &self.channel_prefix,
                &self.alive,
            ],
        )
        .arg(owner.as_str())
        .arg(self.client.config().publish_command().as_str())
        .arg(ferrisson_core::__engine::time::millis(thread_wait(
            wait_limit,
        )));
        let _: i64 = self.client.eval(&call).await?;
        Ok(())
    }
}

impl HoldKind for FairShared {
    fn names(&self) -> &LockNames {
        &self.names
    }

    fn kind_name(&self) -> &'static str {
        "fair_lock"
    }

    fn renew_script(&self) -> &'static Script {
        &RENEW_HASH
    }

    /// On the owner's own channel, woken by the release before it; calling again every
    /// heartbeat keeps its place alive and drops dead waiters ahead.
    fn waiting(&self, owner: &Owner) -> Waiting<'_> {
        Waiting {
            channel: Cow::Owned(format!("{}:{owner}", self.channel_prefix)),
            policy: |_| Wake::All,
            recheck: Backoff::fixed(self.heartbeat()),
            spin: None,
            interest: u64::MAX,
        }
    }

    fn try_call(&self, args: &TryArgs<'_>) -> ScriptCall {
        // A waiter's deadline is three heartbeats ahead: a live waiter refreshes it in time
        // even after missing two, and a dead one is dropped at most a waiter timeout after its
        // last call (the deadline, plus at most one heartbeat until another waiter calls).
        let waiter_deadline = self.waiter_timeout - self.heartbeat();
        let publish = self.client.config().publish_command().as_str();
        let flags: String = [
            (args.wait, 'w'),
            (self.fenced, 'f'),
            (publish == "spublish", 's'),
            (args.retry, 'r'),
            (!self.reentrant, 'n'),
        ]
        .into_iter()
        .filter_map(|(on, flag)| on.then_some(flag))
        .collect();
        // The other keys are derived in the script from the lock's, and the two waiting
        // times travel as one argument: each argument costs Redis on every call.
        let call = ScriptCall::new(&ACQUIRE, &[&self.key, self.undone_key()])
            .arg(ferrisson_core::__engine::time::millis(args.lease))
            .arg(args.owner.as_str())
            .arg(flags)
            .arg(format!(
                "{}:{}{}",
                ferrisson_core::__engine::time::millis(waiter_deadline),
                ferrisson_core::__engine::time::millis(thread_wait(args.wait_limit)),
                if limited(args.wait_limit) { ":t" } else { "" }
            ))
            .arg(args.seq);
        if args.retry {
            call.arg(args.believed)
        } else {
            call
        }
    }

    /// Leaves the queue.
    fn give_up(
        self: Arc<Self>,
        owner: Owner,
        wait_limit: Option<Duration>,
    ) -> BoxFuture<'static, Result<()>> {
        Box::pin(async move { self.leave(&owner, wait_limit).await })
    }

    fn release_call(&self, args: &ReleaseArgs<'_>) -> ScriptCall {
        let call = ScriptCall::new(&RELEASE, &[&self.key, self.record_key()])
            .arg(
                args.renew_lease
                    .map_or(0, ferrisson_core::__engine::time::millis),
            )
            .arg(args.owner.as_str())
            .arg(self.client.config().publish_command().as_str());
        match args.record {
            Some(record) => record.args(call, &self.client, args.retry),
            None => call,
        }
    }
}
