//! The reentrant lock.

use std::sync::Arc;
use std::time::Duration;

use ferrisson_core::engine::ClientEngine;
use ferrisson_core::engine::keys::{RequestId, prefixed};
use ferrisson_core::engine::{
    Attempt, CleanupGuard, FORCE_RELEASE_HASH, FirstRound, Instant, LeaseEnd, LeaseSpec,
    MAX_HANDOFF_STREAK, RENEW_HASH, Release, Released, ScriptCall, WaitSpec, hash_hold_count,
    lock_message_policy, wait_on,
};
use ferrisson_core::{Client, Error, HoldGuard, Lock, LockOptions, Owner, Result};

use crate::LockGuard;
use crate::scripts::{ACQUIRE, RELEASE};

/// What a waiter tells a local releaser that may hand it the lock.
#[derive(Debug)]
struct WaiterInfo {
    owner: Owner,
    /// The fixed lease the waiter asked for (`None`: the watchdog keeps the hold).
    lease: Option<Duration>,
}

/// A reentrant distributed lock with Redisson's `RLock` semantics and Redis layout.
///
/// - **Exclusive per acquisition, reentrant per owner.** A handle with no owner of its own
///   takes every hold under a fresh owner, so two acquisitions never share a hold: futures
///   joined in one task exclude each other as two processes do, as with
///   `tokio::sync::Mutex`. Re-entry is explicit: a handle bound to an [`Owner`] with
///   [`owned_by`](Self::owned_by) (a guard's [`owner`](LockGuard::owner), or
///   [`Client::new_owner`]) re-enters when that owner already holds the lock, from any task,
///   and each hold is released on its own.
/// - **Leases.** A hold taken without a fixed lease is kept alive by the client's watchdog,
///   which renews it every third of the lease (30 s by default). If the process dies, the lock
///   ends by itself at most one lease after the last renewal. A hold taken with a fixed lease
///   ends when the lease runs out, released or not.
/// - **Loss is never silent.** When a hold cannot be kept (Redis lost the key in a restart or
///   failover, renewals failed, the process stalled past the lease), the guard's
///   [`lost`](LockGuard::lost) signal fires before the lease can have run out on the server.
/// - **Fencing.** A lock made with [`fenced`](Self::fenced) hands out a strictly increasing
///   token with every acquisition ([`LockGuard::token`]) so that the protected resource can
///   reject writes of a holder that lost the lock without knowing it.
/// - **Interop.** The key layout and messages are Redisson's: a Java service using
///   `redisson.getLock(name)` and this lock on the same name exclude and wake each other.
///
/// # Examples
///
/// Take it, check it, release it:
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = ferrisson_testkit::RedisServer::spawn();
/// # let client = ferrisson_core::Client::connect(&server.url()).await?;
/// use ferrisson_lock::{Lock, ReentrantLock};
///
/// let lock = ReentrantLock::new(&client, "orders:42")?;
/// let guard = lock.lock().await?;
/// assert!(lock.is_locked().await?);
/// // Another acquisition waits, even in this task: re-entry goes through an owner.
/// assert!(lock.try_lock().await?.is_none());
/// let mine = lock.owned_by(guard.owner().clone());
/// assert_eq!(mine.hold_count().await?, 1);
/// guard.unlock().await?;
/// assert!(!lock.is_locked().await?);
/// # Ok(()) }
/// ```
///
/// ## Run a job on one instance at a time
///
/// Every instance of a service tries; the one that gets the lock runs the job, the others skip
/// this round instead of queueing up:
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = ferrisson_testkit::RedisServer::spawn();
/// # let client = ferrisson_core::Client::connect(&server.url()).await?;
/// use ferrisson_lock::{Lock, ReentrantLock};
///
/// let lock = ReentrantLock::new(&client, "jobs:nightly-invoices")?;
/// match lock.try_lock().await? {
///     Some(guard) => {
///         // ... run the job, watching guard.lost() ...
///         guard.unlock().await?;
///     }
///     None => { /* another instance runs it */ }
/// }
/// # Ok(()) }
/// ```
///
/// ## Wait a little, hold for a fixed lease
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = ferrisson_testkit::RedisServer::spawn();
/// # let client = ferrisson_core::Client::connect(&server.url()).await?;
/// use std::time::Duration;
/// use ferrisson_lock::{Lock, LockOptions, ReentrantLock};
///
/// let lock = ReentrantLock::new(&client, "reports")?;
/// let options = LockOptions::new()
///     .wait(Duration::from_millis(500))
///     .lease(Duration::from_secs(10));
/// let guard = lock.try_lock_with(options).await?.expect("free");
/// assert!(lock.remaining_ttl().await?.unwrap() <= Duration::from_secs(10));
///
/// // Another task waits half a second, then gives up.
/// let other = lock.clone();
/// let got = tokio::spawn(async move { other.try_lock_with(options).await }).await??;
/// assert!(got.is_none());
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
///
/// ## Stop the work when the lock is lost
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = ferrisson_testkit::RedisServer::spawn();
/// # let client = ferrisson_core::Client::connect(&server.url()).await?;
/// use ferrisson_lock::{Lock, ReentrantLock};
///
/// let lock = ReentrantLock::new(&client, "ledger")?;
/// let guard = lock.lock().await?;
/// let outcome = tokio::select! {
///     reason = guard.lost() => Err(format!("lock lost: {reason}")),
///     () = async { /* the protected work */ } => Ok(()),
/// };
/// assert!(outcome.is_ok());
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct ReentrantLock {
    shared: Arc<LockShared>,
    owner: Option<Owner>,
}

impl std::fmt::Debug for ReentrantLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReentrantLock")
            .field("key", &self.shared.key)
            .field("fenced", &self.shared.fenced)
            .field("owner", &self.owner)
            .finish()
    }
}

pub(crate) struct LockShared {
    pub(crate) client: Client,
    pub(crate) key: Arc<str>,
    channel: String,
    token_key: String,
    /// `redisson_unlock_latch:{key}`, before a release's request id.
    latch_prefix: String,
    fenced: bool,
}

impl ReentrantLock {
    /// A handle to the lock named `name` (after the client's namespace prefix).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when `name` is empty.
    pub fn new(client: &Client, name: &str) -> Result<Self> {
        Self::build(client, name, false)
    }

    /// A handle to the lock named `name` that hands out fencing tokens (Redisson `RFencedLock`
    /// layout): every acquisition, re-entries included, increments the counter
    /// `redisson_lock_token:{name}`, which never expires.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = ferrisson_testkit::RedisServer::spawn();
    /// # let client = ferrisson_core::Client::connect(&server.url()).await?;
    /// use ferrisson_lock::{Lock, ReentrantLock};
    ///
    /// let lock = ReentrantLock::fenced(&client, "ledger")?;
    /// let first = lock.lock().await?;
    /// let token = first.token().expect("fenced");
    /// first.unlock().await?;
    /// let second = lock.lock().await?;
    /// assert!(second.token() > Some(token));
    /// second.unlock().await?;
    /// # Ok(()) }
    /// ```
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
            shared: Arc::new(LockShared {
                client: client.clone(),
                channel: prefixed("redisson_lock__channel", &key),
                token_key: prefixed("redisson_lock_token", &key),
                latch_prefix: prefixed("redisson_unlock_latch", &key),
                key: key.into(),
                fenced,
            }),
            owner: None,
        })
    }

    /// This lock, acquired and queried as `owner` instead of a fresh owner per acquisition:
    /// for holds that re-enter, or that one task takes and another releases.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = ferrisson_testkit::RedisServer::spawn();
    /// # let client = ferrisson_core::Client::connect(&server.url()).await?;
    /// use ferrisson_lock::{Lock, ReentrantLock};
    ///
    /// let owner = client.new_owner();
    /// let lock = ReentrantLock::new(&client, "batch:7")?.owned_by(owner);
    /// let guard = lock.lock().await?;
    /// let lock2 = lock.clone();
    /// tokio::spawn(async move {
    ///     let again = lock2.lock().await?; // the same owner re-enters from another task
    ///     assert_eq!(lock2.hold_count().await?, 2);
    ///     again.unlock().await?;
    ///     guard.unlock().await // and releases the first hold there too
    /// })
    /// .await??;
    /// assert!(!lock.is_locked().await?);
    /// # Ok(()) }
    /// ```
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

    /// The owner this handle acquires and queries as, when it has one of its own
    /// ([`owned_by`](Self::owned_by)); `None`: each acquire takes a fresh owner, so that no two
    /// acquisitions share a hold (see [`Owner`]).
    pub fn owner(&self) -> Option<&Owner> {
        self.owner.as_ref()
    }

    async fn acquire_hold(&self, options: LockOptions) -> Result<Option<LockGuard>> {
        options.validate()?;
        let owner = Owner::for_call(&self.shared.client, self.owner.as_ref());
        let lease = options.get_lease();
        let deadline = options
            .get_wait()
            .and_then(ferrisson_core::duration::deadline_after);
        let client = &self.shared.client;
        let waits = options.get_wait() != Some(Duration::ZERO);
        let tag = || -> ferrisson_core::engine::Tag {
            Arc::new(WaiterInfo {
                owner: owner.clone(),
                lease,
            })
        };
        // When other local waiters keep the channel subscribed, the lock is taken and they are
        // ahead: queue behind them without a try (no barging, no wasted call). They are woken
        // or handed the lock first, and one leaving unserved wakes the next.
        let early = if waits {
            client.subscribe_if_confirmed(&self.shared.channel, || Some(tag()))
        } else {
            None
        };
        let (subscription, first) = match early {
            Some(subscription) => (subscription, FirstRound::Sleep),
            None => {
                match self.attempt(&owner, lease).await? {
                    Attempt::Acquired(guard) => return Ok(Some(guard)),
                    Attempt::Held(_) if !waits => return Ok(None),
                    Attempt::Held(_) => {}
                }
                let subscription =
                    client.subscribe(&self.shared.channel, lock_message_policy, Some(tag()));
                let confirm_within = match deadline {
                    Some(d) => d.saturating_duration_since(Instant::now()),
                    None => client.config().get_response_timeout(),
                };
                Box::pin(
                    subscription
                        .confirmed(confirm_within.min(client.config().get_response_timeout())),
                )
                .await;
                // Subscribed first, then tried again: a release between the first try and the
                // subscription cannot be missed.
                (subscription, FirstRound::Try)
            }
        };
        let spec = WaitSpec {
            channel: &self.shared.channel,
            policy: lock_message_policy,
            deadline,
            recheck: client.config().get_lease(),
            // The subscription carries the tag already.
            tag: None,
        };
        wait_on(client, &subscription, &spec, first, || {
            self.attempt(&owner, lease)
        })
        .await
    }

    /// One acquire script call (with its retries). If the caller drops the future while the
    /// call may have run, a release of one hold of `owner` follows it on the same connection,
    /// so Redis runs it after the acquire: a hold the abandoned call took is given back at once.
    /// (A call that did not take a hold makes that release a no-op: a re-entrant acquire always
    /// succeeds, and a first acquire that failed leaves the owner holding nothing.)
    async fn attempt(&self, owner: &Owner, lease: Option<Duration>) -> Result<Attempt> {
        let abandoned = CleanupGuard::new(|| {
            let (shared, owner) = (self.shared.clone(), owner.clone());
            async move {
                if let Err(e) = shared.release_hold(&owner, None, false).await {
                    tracing::warn!(key = %shared.key, %owner, error = %e, "releasing after an abandoned acquire failed; a hold it took ends with its lease");
                }
            }
        });
        // Boxed: the call's state lives on the heap only while it runs, so a waiter's future
        // stays small for as long as it waits.
        let result = Box::pin(self.shared.attempt(owner.clone(), lease)).await;
        // Still unknown after the settle window: release what the call may have taken.
        abandoned.settle(&result);
        result
    }
}

/// The lock's waiting: waiting costs Redis nothing while the lock does not change hands (the
/// waiter sleeps on the client's one subscriber connection until a release message, or the
/// holder's lease ending, wakes it). Local waiters queue in arrival order: a releasing holder of
/// the same client hands the lock to the first of them in its release call (at most 8 times in
/// a row, then it frees the lock for everyone), and a new caller queues behind them instead of
/// barging in. A dropped waiter hands any wake-up it received to the next local waiter, and a
/// lock handed to a waiter that has left is released at once.
impl Lock for ReentrantLock {
    fn client(&self) -> &Client {
        &self.shared.client
    }

    fn key(&self) -> &str {
        &self.shared.key
    }

    fn acquire(
        &self,
        options: LockOptions,
    ) -> impl std::future::Future<Output = Result<Option<LockGuard>>> + Send {
        self.acquire_hold(options)
    }

    async fn force_unlock(&self) -> Result<bool> {
        let client = &self.shared.client;
        let call = ScriptCall::new(
            &FORCE_RELEASE_HASH,
            &[&self.shared.key, &self.shared.channel],
        )
        .arg(client.config().get_publish_command().as_str())
        .arg("0");
        let released: i64 = client.eval(&call).await?;
        Ok(released == 1)
    }

    fn hold_count(&self) -> impl std::future::Future<Output = Result<u32>> + Send {
        hash_hold_count(&self.shared.client, &self.shared.key, self.owner.as_ref())
    }
}

impl LockShared {
    async fn attempt(self: &Arc<Self>, owner: Owner, lease: Option<Duration>) -> Result<Attempt> {
        let client = &self.client;
        // The holds this owner has locally: the table changes only when a reply arrives, so
        // reading it at a retry gives the count from before the first try.
        let believed = || client.lease_state(&RENEW_HASH, &self.key, owner.as_shared());
        // Once a hold is kept by the watchdog it stays so until its last release: a shorter
        // fixed lease on re-entry would cut the TTL under the watchdog's feet. (Without a fixed
        // lease there is nothing to look up before the first try: the script reads the
        // believed count only on a retry.)
        let watched = lease.is_none() || believed().is_some_and(|s| s.renewing);
        let lease = match lease {
            Some(lease) if !watched => lease,
            _ => client.config().get_lease(),
        };
        let mut sent_at = Instant::now();
        let reply: Vec<i64> = client
            .settle(|n| {
                sent_at = Instant::now();
                let held = if n > 0 {
                    believed().map_or(0, |s| s.holds)
                } else {
                    0
                };
                let call = ScriptCall::new(&ACQUIRE, &[&self.key, &self.token_key])
                    .arg(ferrisson_core::duration::millis(lease))
                    .arg(owner.as_str())
                    .arg(held)
                    .arg(if n > 0 { "1" } else { "0" })
                    .arg(if self.fenced { "1" } else { "0" });
                async move { client.eval_once(&call).await }
            })
            .await?;
        match reply.as_slice() {
            [1, held, token] => {
                if tracing::enabled!(tracing::Level::DEBUG) {
                    let believed = believed().map_or(0, |s| s.holds);
                    if u32::try_from(*held).ok() != Some(believed + 1) {
                        tracing::debug!(key = %self.key, %owner, held, believed, "hold count differs from the local one");
                    }
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
            other => Err(Error::Protocol(format!("lock/acquire replied {other:?}"))),
        }
    }

    /// Releases one hold of `owner`, handing the lock to a local waiter when `handoff` allows
    /// and one waits (then it builds that waiter's guard and delivers it). Retried with one
    /// request id, so a retry after a lost reply cannot release twice.
    ///
    /// Cancel safe: dropped while the call is in flight, it sends the release again in the
    /// background with the same request id, and undoes a hand-off it could not deliver.
    pub(crate) async fn release_hold(
        self: &Arc<Self>,
        owner: &Owner,
        renew_lease: Option<Duration>,
        handoff: bool,
    ) -> Result<Released> {
        let client = &self.client;
        let claim = if handoff {
            client.claim_waiter(&self.channel, MAX_HANDOFF_STREAK)
        } else {
            None
        };
        // The claimed waiter: its owner, the lease it asked for, and whether it is watched.
        let successor: Option<(Owner, Duration, bool)> = claim
            .as_ref()
            .and_then(|c| c.tag())
            .and_then(|tag| tag.downcast_ref::<WaiterInfo>())
            .map(|waiter| match waiter.lease {
                Some(lease) => (waiter.owner.clone(), lease, false),
                None => (waiter.owner.clone(), client.config().get_lease(), true),
            });
        // Random, as a UUID v4 is: the latch key must not collide with another release's.
        let request_id = RequestId::random();
        // Dropped while the call may have run (or left unknown), the release is sent again with
        // the same request id (counted once), and a hand-off to a waiter that was never told
        // is undone.
        let resend = CleanupGuard::new(|| {
            let (shared, owner) = (self.clone(), owner.clone());
            let successor = successor.as_ref().map(|(o, _, _)| o.clone());
            async move {
                let outcome = shared
                    .release_call(&owner, renew_lease, None, request_id)
                    .await;
                let undo = match outcome {
                    Ok((2, _)) => successor,
                    Ok(_) => None,
                    Err(e) => {
                        tracing::warn!(key = %shared.key, %owner, error = %e, "resending an abandoned release failed; the hold ends with its lease");
                        None
                    }
                };
                if let Some(successor) = undo
                    && let Err(e) = shared.clone().release_one(successor.clone()).await
                {
                    tracing::warn!(key = %shared.key, %successor, error = %e, "undoing an abandoned hand-off failed; the hold ends with its lease");
                }
            }
        });
        let sent_at = Instant::now();
        let reply = self
            .release_call(
                owner,
                renew_lease,
                successor.as_ref().map(|(o, lease, _)| (o, *lease)),
                request_id,
            )
            .await;
        // Still unknown after the settle window: send it again in the background.
        resend.settle(&reply);
        match reply? {
            (-1, _) => Ok(Released::NotOwner),
            (0, _) => Ok(Released::StillHeld),
            (1, _) => Ok(Released::Freed),
            (2, token) => {
                let (Some(claim), Some((successor_owner, lease, renew))) = (claim, successor)
                else {
                    return Err(Error::Protocol(
                        "lock/release handed off without a successor".into(),
                    ));
                };
                let handle = client.hold_lease(LeaseSpec {
                    script: &RENEW_HASH,
                    key: self.key.clone(),
                    owner: successor_owner.as_shared().clone(),
                    lease,
                    renew,
                    sent_at,
                });
                let token = self.fenced.then(|| u64::try_from(token).unwrap_or(0));
                let guard = HoldGuard::new(self.clone(), successor_owner, handle, token);
                // A waiter that left meanwhile gets nothing: its guard comes back and is
                // dropped, which releases the lock.
                if let Err(unclaimed) = claim.deliver(Box::new(guard)) {
                    drop(unclaimed);
                }
                Ok(Released::HandedOff)
            }
            (code, _) => Err(Error::Protocol(format!("lock/release replied code {code}"))),
        }
    }

    /// Releases one hold of `owner`, without a hand-off, as a boxed future: what a cleanup
    /// inside [`release_hold`](Self::release_hold) calls (the box ends the recursion).
    fn release_one(
        self: Arc<Self>,
        owner: Owner,
    ) -> futures::future::BoxFuture<'static, Result<Released>> {
        Box::pin(async move { self.release_hold(&owner, None, false).await })
    }

    /// The `lock/release` script call: `(code, token)` as the script documents.
    async fn release_call(
        &self,
        owner: &Owner,
        renew_lease: Option<Duration>,
        successor: Option<(&Owner, Duration)>,
        request_id: RequestId,
    ) -> Result<(i64, i64)> {
        let client = &self.client;
        let latch = request_id.latch_key(&self.latch_prefix);
        let call = ScriptCall::new(
            &RELEASE,
            &[&self.key, &self.channel, &latch, &self.token_key],
        )
        .arg(renew_lease.map_or(0, ferrisson_core::duration::millis))
        .arg(owner.as_str())
        .arg(ferrisson_core::duration::millis(client.retry_window()))
        .arg(client.config().get_publish_command().as_str())
        .arg(successor.map_or("", |(o, _)| o.as_str()))
        .arg(successor.map_or(0, |(_, lease)| ferrisson_core::duration::millis(lease)))
        .arg(if self.fenced { "1" } else { "0" });
        let reply: Vec<i64> = client.eval(&call).await?;
        match reply.as_slice() {
            [code, token] => Ok((*code, *token)),
            other => Err(Error::Protocol(format!("lock/release replied {other:?}"))),
        }
    }
}

impl Release for LockShared {
    fn key(&self) -> &str {
        &self.key
    }

    fn release(
        self: Arc<Self>,
        owner: Owner,
        end: LeaseEnd,
    ) -> futures::future::BoxFuture<'static, Result<Released>> {
        let renew_lease = end.renewed.then(|| self.client.config().get_lease());
        // Only the last local hold of a live lock can go straight to a local waiter.
        let handoff = end.lost.is_none() && end.last_hold;
        Box::pin(async move { self.release_hold(&owner, renew_lease, handoff).await })
    }
}
