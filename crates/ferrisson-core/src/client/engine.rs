//! What synchronizer crates need of a [`Client`] ([`ClientEngine`]), implemented over its
//! connections, hub, watchdog and task tracker.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use redis::FromRedisValue;

use super::{Client, SHUT_DOWN};
use crate::error::{Error, Result, map_redis_error};
use crate::keys::validate_name;
use crate::owner::Owner;
use crate::pubsub::{Claim, Takes};
use crate::releasing::ReleaseMark;
use crate::replication::Synced;
use crate::script::{Script, ScriptCall};
use crate::watchdog::{LeaseHandle, LeaseSpec, LeaseState};

/// What synchronizer crates need of a [`Client`] beyond what users touch: script calls that
/// settle lost replies, plain commands, pub/sub waiters and hand-off claims, leases with the
/// watchdog, key naming. Part of the [engine](crate::__engine); users never need it.
#[allow(async_fn_in_trait)]
pub trait ClientEngine: sealed::Sealed {
    /// The Redis key of the object the user named `name`: the namespace prefix, then `name`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when `name` is empty.
    fn object_key(&self, name: &str) -> Result<String>;

    /// On a cluster, checks that every key or channel in `related` hashes to the slot of
    /// `key`, as the synchronizer's scripts need (one script touches one slot); always `Ok` on
    /// a standalone or Sentinel client.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] naming the first one that does not.
    fn check_same_slot(&self, key: &str, related: &[&str]) -> Result<()>;

    /// Runs a script call once: `EVALSHA`, and `EVAL` of the source when the server answers
    /// `NOSCRIPT`.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] (naming the call's first key) when a key holds another type,
    /// [`Error::Redis`] for any other failure, transient or not.
    async fn eval_once<T: FromRedisValue>(&self, call: &ScriptCall) -> Result<T>;

    /// Runs a script call until its outcome is known (`settle`), then, with
    /// replica sync on and a script that writes, waits for the replicas (logging when they do
    /// not acknowledge: the change stands on the primary). Retried per
    /// the client's [`RetryPolicy`](crate::RetryPolicy) when the connection broke, and on for
    /// the retry window while a lost reply leaves it unknown whether the call ran. Only for
    /// scripts that are idempotent with the same arguments (recorded in the client's record, or
    /// carrying the state the client believes in).
    ///
    /// # Errors
    ///
    /// As [`eval_once`](Self::eval_once), once the outcome is known to be a failure or could
    /// not be learnt within the window.
    async fn eval<T: FromRedisValue>(&self, call: &ScriptCall) -> Result<T>;

    /// Runs a script call that only reads (or whose every run is as good as one: a `…/state`
    /// script), retried per the client's [`RetryPolicy`](crate::RetryPolicy) when the
    /// connection broke, and never settled past it: a read whose reply was lost changed
    /// nothing, so there is nothing to learn by asking on for the retry window.
    ///
    /// # Errors
    ///
    /// As [`eval_once`](Self::eval_once), once the retries are used up.
    async fn eval_read<T: FromRedisValue>(&self, call: &ScriptCall) -> Result<T>;

    /// As [`eval`](Self::eval), with the call made for each attempt: `call(n)` for attempt `n`
    /// (0 the first), so that a retry can tell the script it is one (a release that recorded
    /// nothing answers a retry differently).
    ///
    /// # Errors
    ///
    /// As [`eval`](Self::eval).
    async fn eval_each<T: FromRedisValue>(&self, call: impl FnMut(u32) -> ScriptCall) -> Result<T>;

    /// Sends a plain command, retrying when the connection broke. Only for idempotent commands.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] (naming the command's first argument) when the key holds another
    /// type, [`Error::Redis`] otherwise.
    async fn query<T: FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T>;

    /// Whether `key` exists (`EXISTS`): a lock is held, a semaphore or latch is set.
    ///
    /// # Errors
    ///
    /// [`Error::Redis`].
    async fn exists(&self, key: &str) -> Result<bool>;

    /// The time left before `key` expires (`PTTL`); `None` when it does not exist or has no
    /// expiry.
    ///
    /// # Errors
    ///
    /// [`Error::Redis`].
    async fn remaining_ttl(&self, key: &str) -> Result<Option<Duration>>;

    /// The count stored in field `field` of hash `key` (`HGET`), 0 when absent: how many times
    /// an owner holds a lock.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] when `key` is not a hash, [`Error::Redis`].
    async fn hash_count(&self, key: &str, field: &str) -> Result<u32>;

    /// Reserves the longest-waiting local waiter of `channel` that takes what `takes` says
    /// (waits with a [`Need`](crate::pubsub::Need) of it) for a hand-off, unless `max_streak`
    /// hand-offs in a row have happened since the last public message.
    fn claim_waiter(&self, channel: &str, takes: Takes, max_streak: u32) -> Option<Claim>;

    /// Registers a hold with the client's watchdog.
    fn hold_lease(&self, spec: LeaseSpec) -> LeaseHandle;

    /// How long an unlock result is kept for a retried release: the retry window of a call.
    fn retry_window(&self) -> Duration;

    /// Runs `cleanup` in the background on the current Tokio runtime, as work that
    /// [`Client::shutdown`] waits for; returns false (nothing runs) outside a runtime.
    fn spawn_cleanup(&self, cleanup: impl Future<Output = ()> + Send + 'static) -> bool;

    /// An acquisition starts: [`Error::Closed`] once the client is shut down; otherwise a mark
    /// that [`Client::shutdown`] waits for until it is dropped (the acquisition has ended, and
    /// whatever it left to clean up is spawned).
    ///
    /// # Errors
    ///
    /// [`Error::Closed`].
    fn begin_acquisition(&self) -> Result<InFlight>;

    /// Registers a live hold (a guard, a semaphore's permits) that [`Client::shutdown`] gives
    /// back if it is still alive then; the ticket goes with it, and is claimed by whoever
    /// gives it back first ([`HoldTicket::claim`](crate::holds::HoldTicket::claim)).
    fn register_hold(&self, give: Arc<dyn crate::holds::GiveBack>) -> crate::holds::HoldTicket;
}

/// An acquisition in flight, which [`Client::shutdown`] waits for until it is dropped
/// ([`ClientEngine::begin_acquisition`]).
#[derive(Debug)]
pub struct InFlight {
    _token: tokio_util::task::task_tracker::TaskTrackerToken,
}

impl ClientEngine for Client {
    fn object_key(&self, name: &str) -> Result<String> {
        validate_name(name)?;
        let key = format!("{}{name}", self.inner.config.namespace);
        if self.inner.conn.is_cluster() {
            crate::keys::validate_cluster_name(&key)?;
        }
        Ok(key)
    }

    fn check_same_slot(&self, key: &str, related: &[&str]) -> Result<()> {
        if !self.inner.conn.is_cluster() {
            return Ok(());
        }
        let slot = crate::keys::hash_slot(key);
        match related.iter().find(|r| crate::keys::hash_slot(r) != slot) {
            Some(other) => Err(Error::InvalidArgument(format!(
                "on a Redis Cluster, `{other}` (named by the shared protocol after `{key}`) lands in another slot than `{key}`: use a name without braces for this synchronizer"
            ))),
            None => Ok(()),
        }
    }

    async fn eval_once<T: FromRedisValue>(&self, call: &ScriptCall) -> Result<T> {
        let value = self
            .inner
            .batcher
            .eval(call)
            .await
            .map_err(|e| script_error(e, call))?;
        redis::from_redis_value(value)
            .map_err(|e| Error::Protocol(format!("{}: {e}", call.script().name())))
    }

    async fn eval<T: FromRedisValue>(&self, call: &ScriptCall) -> Result<T> {
        let (reply, synced) = self.settle(|_| self.eval_once_synced(call)).await?;
        warn_unsynced(call, synced);
        Ok(reply)
    }

    async fn eval_read<T: FromRedisValue>(&self, call: &ScriptCall) -> Result<T> {
        self.retry_loop(|_| self.eval_once(call), None).await
    }

    async fn eval_each<T: FromRedisValue>(
        &self,
        mut call: impl FnMut(u32) -> ScriptCall,
    ) -> Result<T> {
        let (reply, synced, call) = self
            .settle(|n| {
                let call = call(n);
                async move {
                    let (reply, synced) = self.eval_once_synced(&call).await?;
                    Ok((reply, synced, call))
                }
            })
            .await?;
        warn_unsynced(&call, synced);
        Ok(reply)
    }

    async fn query<T: FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T> {
        self.retry_loop(
            |_| async {
                let value = self.inner.conn.query(cmd).await.map_err(|e| {
                    // The key is the command's first argument (`EXISTS key`, `HGET key field`).
                    let key = cmd
                        .args_iter()
                        .nth(1)
                        .and_then(|a| match a {
                            redis::Arg::Simple(bytes) => std::str::from_utf8(bytes).ok(),
                            _ => None,
                        })
                        .unwrap_or_default();
                    map_redis_error(e, key)
                })?;
                redis::from_redis_value(value).map_err(|e| Error::Protocol(e.to_string()))
            },
            None,
        )
        .await
    }

    async fn exists(&self, key: &str) -> Result<bool> {
        let exists: i64 = self.query(redis::cmd("EXISTS").arg(key)).await?;
        Ok(exists == 1)
    }

    async fn remaining_ttl(&self, key: &str) -> Result<Option<Duration>> {
        let ttl: i64 = self.query(redis::cmd("PTTL").arg(key)).await?;
        Ok(u64::try_from(ttl).ok().map(Duration::from_millis))
    }

    async fn hash_count(&self, key: &str, field: &str) -> Result<u32> {
        let count: Option<u32> = self.query(redis::cmd("HGET").arg(key).arg(field)).await?;
        Ok(count.unwrap_or(0))
    }

    fn claim_waiter(&self, channel: &str, takes: Takes, max_streak: u32) -> Option<Claim> {
        self.hand_offs()
            .and_then(|hub| hub.claim(channel, takes, max_streak))
    }

    fn hold_lease(&self, spec: LeaseSpec) -> LeaseHandle {
        self.inner.watchdog.hold(spec)
    }

    fn retry_window(&self) -> Duration {
        let config = &self.inner.config;
        config.retry.window(config.response_timeout)
    }

    fn spawn_cleanup(&self, cleanup: impl Future<Output = ()> + Send + 'static) -> bool {
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                self.inner.tasks.spawn_on(cleanup, &runtime);
                true
            }
            Err(_) => false,
        }
    }

    fn register_hold(&self, give: Arc<dyn crate::holds::GiveBack>) -> crate::holds::HoldTicket {
        self.inner.holds.register(give)
    }

    fn begin_acquisition(&self) -> Result<InFlight> {
        if self.inner.closing.is_cancelled() {
            return Err(SHUT_DOWN);
        }
        Ok(InFlight {
            _token: self.inner.tasks.token(),
        })
    }
}

/// The engine calls only core makes.
impl Client {
    /// The client's own key under `prefix` (`<prefix>:<the client id in 32 hex digits>`): its
    /// record on an object, its undone marks (`crate::record`).
    pub(crate) fn client_latch(&self, prefix: &str) -> String {
        self.inner.latch_id.latch_key(prefix)
    }

    /// The client's pub/sub hub: waiters' registrations, local wake-ups and turns.
    pub(crate) fn hub(&self) -> &crate::pubsub::Hub {
        &self.inner.hub
    }

    /// As [`eval_once`](Self::eval_once), and with replica sync on (for a script that writes),
    /// `WAIT`s for the replicas in the same round trip: the second result says whether enough
    /// of them acknowledged ([`Error::NotReplicated`] when not, [`Error::Redis`] when the wait
    /// failed). With sync off, the second result is `Ok`.
    ///
    /// # Errors
    ///
    /// As [`eval_once`](Self::eval_once), for the script call itself.
    pub(crate) async fn eval_once_synced<T: FromRedisValue>(
        &self,
        call: &ScriptCall,
    ) -> Result<(T, Result<()>)> {
        let replication = &self.inner.replication;
        if !replication.enabled() || !call.script().writes() || crate::replication::rolling_back() {
            return Ok((self.eval_once(call).await?, Ok(())));
        }
        let (value, synced) = replication
            .eval_synced(call)
            .await
            .map_err(|e| script_error(e, call))?;
        let value = redis::from_redis_value(value)
            .map_err(|e| Error::Protocol(format!("{}: {e}", call.script().name())))?;
        let key = call.keys().next().unwrap_or_default();
        let synced = match synced {
            Ok(Synced::NotNeeded | Synced::Yes) => Ok(()),
            Ok(Synced::No { acked, wanted }) => {
                tracing::debug!(%key, acked, wanted, "replicas did not acknowledge the change in time");
                Err(Error::NotReplicated { acked, wanted })
            }
            Err(e) => Err(Error::Redis(e)),
        };
        Ok((value, synced))
    }

    /// Runs `attempt(n)` for n = 0, 1, … until it succeeds, fails with a non-transient error, or
    /// the client's retry policy is used up, for a call that changes state and whose outcome
    /// the caller must know: after a failure that may have
    /// come after the call reached Redis (a lost reply, a timeout, a reset; not a refused
    /// connection), it goes on asking past the retry policy, with the policy's longest pause,
    /// for as long as a request-id latch lasts ([`settle_window`](Self::settle_window)). The
    /// attempts must be idempotent: each one re-asks the same question (`n > 0` tells a retry),
    /// so the first reply that arrives says what happened.
    ///
    /// # Errors
    ///
    /// The last attempt's error: the call failed, or its outcome stayed unknown for the whole
    /// window (then the caller must undo whatever the call may have done).
    pub(crate) async fn settle<T, F, Fut>(&self, attempt: F) -> Result<T>
    where
        F: FnMut(u32) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        self.retry_loop(attempt, Some(self.settle_window())).await
    }

    /// How long [`settle`](Self::settle) keeps asking after a lost reply: the retry window
    /// (how long request-id latches last) less one response timeout, so that the last retry
    /// reaches Redis while the first call's latch still stands.
    pub(crate) fn settle_window(&self) -> Duration {
        self.retry_window()
            .saturating_sub(self.inner.config.response_timeout)
    }

    /// As [`claim_waiter`](Self::claim_waiter), for a lock, whose clients take turns: when the
    /// streak has run out while local waiters wait, the client's turn ends, and the caller,
    /// which then releases publicly, must report how many subscribers its release message
    /// reached ([`end_turn`](Self::end_turn)).
    pub(crate) fn claim_turn(&self, channel: &str, takes: Takes, max_streak: u32) -> Option<Claim> {
        self.hand_offs()
            .and_then(|hub| hub.claim_turn(channel, takes, max_streak))
    }

    /// What the client knows locally about the holds of `owner` on `key`.
    pub(crate) fn lease_state(
        &self,
        script: &Script,
        key: &Arc<str>,
        owner: &Arc<str>,
    ) -> Option<LeaseState> {
        self.inner.watchdog.state(script, key, owner)
    }

    /// A sequence number for a call in a record (`crate::record`): larger than every one
    /// this client handed out before.
    pub(crate) fn next_seq(&self) -> u64 {
        use std::sync::atomic::Ordering;
        self.inner.call_seq.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Marks a release of `owner` in flight until the mark is dropped: `owner`'s acquire
    /// tries wait for it ([`releases_settled`](Self::releases_settled)). Hold the mark for as
    /// long as the release may be sent again.
    pub(crate) fn release_started(&self, owner: &Owner) -> ReleaseMark {
        self.inner.releasing.start(owner)
    }

    /// Waits until no release of `owner` is in flight: an acquire try must not run before a
    /// release of its owner that may be resent (the resend, finding the owner holding, would
    /// free the new hold).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub(crate) async fn releases_settled(&self, owner: &Owner) {
        self.inner.releasing.settled(owner).await;
    }

    /// Resolves once the client is shut down: a waiting call stops waiting then.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub(crate) fn shut_down(&self) -> tokio_util::sync::WaitForCancellationFuture<'_> {
        self.inner.closing.cancelled()
    }
}

/// Releases and other changes are done on the primary whatever the replicas say; a failover
/// before they have one may undo it (a released hold comes back until its lease ends, and is
/// no longer renewed): said once, here.
pub(crate) fn warn_unsynced(call: &ScriptCall, synced: Result<()>) {
    if let Err(e) = synced {
        let key = call.keys().next().unwrap_or_default();
        tracing::warn!(script = call.script().name(), %key, error = %e, "a change the replicas did not acknowledge: a failover now could undo it");
    }
}

fn script_error(e: redis::RedisError, call: &ScriptCall) -> Error {
    map_redis_error(e, call.keys().next().unwrap_or_default())
}

mod sealed {
    /// Only [`Client`](crate::Client) implements [`ClientEngine`](super::ClientEngine).
    pub trait Sealed {}
    impl Sealed for crate::Client {}
}

impl Client {
    /// What the client's server-assisted wake-ups did so far: whether waiters behind another
    /// Redlock client's hold are told of its release by Redis now, how many tries armed that,
    /// how many changes were told, and how many tracked waits found the lock free at their
    /// re-check instead ([`ClientConfig::with_tracked_waits`](crate::ClientConfig::with_tracked_waits)).
    pub fn tracking_stats(&self) -> crate::TrackingStats {
        self.tracking().stats()
    }

    pub(crate) fn tracking(&self) -> &crate::tracking::Tracking {
        self.inner.conn.tracking()
    }
}
