//! The fair lock.

use std::sync::Arc;
use std::time::Duration;

use ferrisson_core::engine::ClientEngine;
use ferrisson_core::engine::keys::{RequestId, prefixed};
use ferrisson_core::engine::{
    Attempt, CleanupGuard, Instant, LeaseEnd, LeaseSpec, RENEW_HASH, Release, Released, ScriptCall,
    Start, WaitSpec, Wake, begin_wait, hash_hold_count, wait_registered,
};
use ferrisson_core::{Client, Error, HoldGuard, Lock, LockOptions, Owner, Result};

use crate::scripts::{ACQUIRE, FORCE_RELEASE, LEAVE, RELEASE};

/// The waiter timeout when none is given: a waiter that stops calling (its process died) is
/// dropped from the queue at most this long after its last call.
pub const DEFAULT_WAITER_TIMEOUT: Duration = Duration::from_secs(5);

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
///   ([`try_lock`](Self::try_lock) included).
/// - **Dead waiters cost seconds, not minutes.** A waiter keeps its place alive by calling
///   again every quarter of the [waiter timeout](Self::with_waiter_timeout) (5 s by default);
///   one whose process died is dropped when it reaches the head, at most one waiter timeout
///   after its last call. A live waiter is never dropped however long the lock is held.
/// - **Leaving is immediate.** A waiter that gives up (wait limit reached, future dropped)
///   leaves the queue at once, and the queue keys expire after their last live waiter.
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
#[derive(Clone)]
pub struct FairLock {
    shared: Arc<FairShared>,
    owner: Option<Owner>,
}

impl std::fmt::Debug for FairLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FairLock")
            .field("key", &self.shared.key)
            .field("fenced", &self.shared.fenced)
            .field("waiter_timeout", &self.shared.waiter_timeout)
            .field("owner", &self.owner)
            .finish()
    }
}

#[derive(Clone)]
struct FairShared {
    client: Client,
    key: Arc<str>,
    queue: String,
    timeouts: String,
    channel_prefix: String,
    token_key: String,
    latch_prefix: String,
    fenced: bool,
    waiter_timeout: Duration,
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

    fn build(client: &Client, name: &str, fenced: bool) -> Result<Self> {
        let key = client.object_key(name)?;
        Ok(Self {
            shared: Arc::new(FairShared {
                client: client.clone(),
                queue: prefixed("redisson_lock_queue", &key),
                timeouts: prefixed("redisson_lock_timeout", &key),
                channel_prefix: prefixed("redisson_lock__channel", &key),
                token_key: prefixed("redisson_lock_token", &key),
                latch_prefix: prefixed("redisson_unlock_latch", &key),
                key: key.into(),
                fenced,
                waiter_timeout: DEFAULT_WAITER_TIMEOUT,
            }),
            owner: None,
        })
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
        let mut shared = (*self.shared).clone();
        shared.waiter_timeout = timeout;
        Ok(Self {
            shared: Arc::new(shared),
            owner: self.owner.clone(),
        })
    }

    /// This lock, acquired and queried as `owner` instead of a fresh owner per acquisition:
    /// the same owner re-enters.
    pub fn owned_by(&self, owner: Owner) -> Self {
        Self {
            shared: self.shared.clone(),
            owner: Some(owner),
        }
    }

    /// The Redis key of the lock.
    pub fn key(&self) -> &str {
        &self.shared.key
    }

    /// Whether acquisitions hand out fencing tokens.
    pub fn is_fenced(&self) -> bool {
        self.shared.fenced
    }

    /// The waiter timeout.
    pub fn waiter_timeout(&self) -> Duration {
        self.shared.waiter_timeout
    }

    /// The owner this handle acquires and queries as, when it has one of its own
    /// ([`owned_by`](Self::owned_by)); `None`: each acquire takes a fresh owner, so that no two
    /// acquisitions share a hold (see [`Owner`]).
    pub fn owner(&self) -> Option<&Owner> {
        self.owner.as_ref()
    }

    async fn acquire_hold(&self, options: LockOptions) -> Result<Option<HoldGuard>> {
        options.validate()?;
        let owner = Owner::for_call(&self.shared.client, self.owner.as_ref());
        let lease = options.get_lease();
        let deadline = options
            .get_wait()
            .and_then(ferrisson_core::duration::deadline_after);
        let waits = options.get_wait() != Some(Duration::ZERO);
        let client = &self.shared.client;
        let channel = format!("{}:{owner}", self.shared.channel_prefix);
        let spec = WaitSpec {
            channel: &channel,
            policy: |_| Wake::All,
            deadline,
            // Calling again keeps the caller's place alive and drops dead waiters ahead.
            recheck: self.shared.heartbeat(),
            tag: None,
        };
        // The caller's own channel lingers subscribed for a while after its last wait: a task
        // taking the lock again and again registers before its first try and needs no try
        // after subscribing.
        let early =
            match begin_wait(client, &spec, waits, || self.attempt(&owner, lease, waits)).await? {
                Start::Done(outcome) => return Ok(outcome),
                Start::Wait(early) => early,
            };
        // Queued from here on: whatever ends this wait without the lock leaves the queue
        // (in the background when the wait is cancelled or fails).
        let queued = CleanupGuard::new(|| {
            let (shared, owner) = (self.shared.clone(), owner.clone());
            async move { shared.leave_logged(&owner).await }
        });
        let outcome = wait_registered(client, early.as_ref(), spec, || {
            self.attempt(&owner, lease, true)
        })
        .await?;
        queued.disarm();
        if outcome.is_none() {
            // Out of time: leave the queue now, so that the caller is gone when it returns.
            self.shared.leave(&owner).await?;
        }
        Ok(outcome)
    }

    /// One acquire script call (with its retries). If the caller drops the future while the
    /// call may have run, a release of one hold of `owner` and a leave follow it on the same
    /// connection, so Redis runs them after it.
    async fn attempt(&self, owner: &Owner, lease: Option<Duration>, wait: bool) -> Result<Attempt> {
        let abandoned = CleanupGuard::new(|| {
            let (shared, owner) = (self.shared.clone(), owner.clone());
            async move {
                let request_id = RequestId::random();
                if let Err(e) = shared.release_call(&owner, None, request_id).await {
                    tracing::warn!(key = %shared.key, %owner, error = %e, "releasing after an abandoned acquire failed; a hold it took ends with its lease");
                }
                shared.leave_logged(&owner).await;
            }
        });
        // Boxed: the call's state lives on the heap only while it runs, so a waiter's future
        // stays small for as long as it waits.
        let result = Box::pin(self.shared.attempt(owner.clone(), lease, wait)).await;
        abandoned.settle(&result);
        result
    }

    /// How many waiters are queued (live or not yet found dead).
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`], [`Error::Redis`].
    pub async fn queue_length(&self) -> Result<usize> {
        self.shared
            .client
            .query(ferrisson_core::engine::redis::cmd("LLEN").arg(&self.shared.queue))
            .await
    }
}

/// The fair lock's waiting: the caller joins the queue in Redis, subscribes to its own channel
/// and sleeps until the release before it wakes it (or a quarter of the waiter timeout passes:
/// then it calls again, which keeps its place alive and drops dead waiters ahead of it). When a
/// wait limit passes, the caller has left the queue by the time the call returns; dropped while
/// waiting, it leaves in the background at once (and wakes the next waiter if it was the head
/// of a free lock). `try_lock` takes the lock only if it is free and nobody is queued ahead,
/// without joining the queue.
impl Lock for FairLock {
    fn client(&self) -> &Client {
        &self.shared.client
    }

    fn key(&self) -> &str {
        &self.shared.key
    }

    fn acquire(
        &self,
        options: LockOptions,
    ) -> impl std::future::Future<Output = Result<Option<HoldGuard>>> + Send {
        self.acquire_hold(options)
    }

    async fn force_unlock(&self) -> Result<bool> {
        let shared = &self.shared;
        let call = ScriptCall::new(
            &FORCE_RELEASE,
            &[&shared.key, &shared.queue, &shared.channel_prefix],
        )
        .arg(shared.client.config().get_publish_command().as_str());
        let released: i64 = shared.client.eval(&call).await?;
        Ok(released == 1)
    }

    fn hold_count(&self) -> impl std::future::Future<Output = Result<u32>> + Send {
        hash_hold_count(&self.shared.client, &self.shared.key, self.owner.as_ref())
    }
}

impl FairShared {
    /// How often a waiter calls again to keep its place alive.
    fn heartbeat(&self) -> Duration {
        self.waiter_timeout / 4
    }

    async fn attempt(
        self: &Arc<Self>,
        owner: Owner,
        lease: Option<Duration>,
        wait: bool,
    ) -> Result<Attempt> {
        let client = &self.client;
        let state = client.lease_state(&RENEW_HASH, &self.key, owner.as_shared());
        let believed = state.map_or(0, |s| s.holds);
        // Once a hold is kept by the watchdog it stays so until its last release.
        let watched = lease.is_none() || state.is_some_and(|s| s.renewing);
        let lease = match lease {
            Some(lease) if !watched => lease,
            _ => client.config().get_lease(),
        };
        // A waiter's deadline is three heartbeats ahead: a live waiter refreshes it in time
        // even after missing two, and a dead one is dropped at most a waiter timeout after its
        // last call (the deadline, plus at most one heartbeat until another waiter calls).
        let waiter_deadline = self.waiter_timeout - self.heartbeat();
        let mut sent_at = Instant::now();
        let reply: Vec<i64> = client
            .settle(|n| {
                sent_at = Instant::now();
                let call = ScriptCall::new(
                    &ACQUIRE,
                    &[
                        &self.key,
                        &self.queue,
                        &self.timeouts,
                        &self.token_key,
                        &self.channel_prefix,
                    ],
                )
                .arg(ferrisson_core::duration::millis(lease))
                .arg(owner.as_str())
                .arg(ferrisson_core::duration::millis(waiter_deadline))
                .arg(if wait { "wait" } else { "try" })
                .arg(believed)
                .arg(if n > 0 { "1" } else { "0" })
                .arg(if self.fenced { "1" } else { "0" })
                .arg(client.config().get_publish_command().as_str());
                async move { client.eval_once(&call).await }
            })
            .await?;
        match reply.as_slice() {
            [1, held, token] => {
                if u32::try_from(*held).ok() != Some(believed + 1) {
                    tracing::debug!(key = %self.key, %owner, held, believed, "hold count differs from the local one");
                }
                let handle = client.hold_lease(LeaseSpec {
                    script: &RENEW_HASH,
                    key: self.key.clone(),
                    owner: owner.as_shared().clone(),
                    lease,
                    renew: watched,
                    sent_at,
                });
                let token = self.fenced.then(|| u64::try_from(*token).unwrap_or(0));
                Ok(Attempt::Acquired(HoldGuard::new(
                    self.clone(),
                    owner,
                    handle,
                    token,
                )))
            }
            [0, ttl] => Ok(Attempt::Held(*ttl)),
            other => Err(Error::Protocol(format!(
                "fair_lock/acquire replied {other:?}"
            ))),
        }
    }

    /// Leaves the queue (idempotent, so retried).
    async fn leave(&self, owner: &Owner) -> Result<()> {
        let call = ScriptCall::new(
            &LEAVE,
            &[&self.key, &self.queue, &self.timeouts, &self.channel_prefix],
        )
        .arg(owner.as_str())
        .arg(self.client.config().get_publish_command().as_str());
        let _: i64 = self.client.eval(&call).await?;
        Ok(())
    }

    async fn leave_logged(&self, owner: &Owner) {
        if let Err(e) = self.leave(owner).await {
            tracing::warn!(key = %self.key, %owner, error = %e, "leaving the queue failed; the entry is dropped when its deadline passes");
        }
    }

    /// Releases one hold of `owner`, retried with one request id.
    ///
    /// Cancel safe: dropped while the call is in flight, it sends the release again in the
    /// background with the same request id.
    async fn release_hold(
        self: &Arc<Self>,
        owner: &Owner,
        renew_lease: Option<Duration>,
    ) -> Result<Released> {
        let request_id = RequestId::random();
        let resend = CleanupGuard::new(|| {
            let (shared, owner) = (self.clone(), owner.clone());
            async move {
                if let Err(e) = shared.release_call(&owner, renew_lease, request_id).await {
                    tracing::warn!(key = %shared.key, %owner, error = %e, "resending an abandoned release failed; the hold ends with its lease");
                }
            }
        });
        let reply = self.release_call(owner, renew_lease, request_id).await;
        resend.settle(&reply);
        match reply? {
            -1 => Ok(Released::NotOwner),
            0 => Ok(Released::StillHeld),
            1 => Ok(Released::Freed),
            code => Err(Error::Protocol(format!(
                "fair_lock/release replied code {code}"
            ))),
        }
    }

    /// The `fair_lock/release` script call.
    async fn release_call(
        &self,
        owner: &Owner,
        renew_lease: Option<Duration>,
        request_id: RequestId,
    ) -> Result<i64> {
        let client = &self.client;
        let latch = request_id.latch_key(&self.latch_prefix);
        let call = ScriptCall::new(
            &RELEASE,
            &[&self.key, &self.queue, &self.channel_prefix, &latch],
        )
        .arg(renew_lease.map_or(0, ferrisson_core::duration::millis))
        .arg(owner.as_str())
        .arg(ferrisson_core::duration::millis(client.retry_window()))
        .arg(client.config().get_publish_command().as_str());
        client.eval(&call).await
    }
}

impl Release for FairShared {
    fn key(&self) -> &str {
        &self.key
    }

    fn release(
        self: Arc<Self>,
        owner: Owner,
        end: LeaseEnd,
    ) -> futures::future::BoxFuture<'static, Result<Released>> {
        let renew_lease = end.renewed.then(|| self.client.config().get_lease());
        Box::pin(async move { self.release_hold(&owner, renew_lease).await })
    }
}
