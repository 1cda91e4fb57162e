//! The lean mutex: one lock kind on the standard Redlock layout, plugged into the engine.

use std::borrow::Cow;

use std::time::Duration;

use ferrisson_core::__engine::keys::prefixed;
use ferrisson_core::__engine::time::millis;
use ferrisson_core::__engine::{
    ClientEngine, HoldKind, LockHandle, LockKind, LockNames, LockType, ReleaseArgs, Script,
    ScriptCall, TryArgs, TryReply, Waiting, is_owner_token, lock_message_policy, read_script_try,
};
use ferrisson_core::__engine::{KeyShape, ObjectKeys};
use ferrisson_core::{Backoff, Client, Error, Owner, Result};

use crate::scripts::{
    MUTEX_ACQUIRE, MUTEX_FORCE_RELEASE, MUTEX_HAND_OFF, MUTEX_RELEASE, MUTEX_RENEW,
};

/// A non-reentrant distributed mutex on the standard Redlock layout (**\[ext\]**, ferrisson's
/// extension): the key holds the holder's token and nothing else, as with rslock, redsync,
/// node-redlock and redis-py's `Lock`, so those clients and this mutex exclude each other on
/// one name. The leanest lock ferrisson ships: one string per lock, no latch keys, and an
/// unfenced acquire is the plain command `SET key token NX PX lease GET` (on Redis 7.0 or later;
/// on an older server, or with
/// [`with_redis_6_compatibility`](ferrisson_core::ClientConfig::with_redis_6_compatibility),
/// the acquire script, which does the same).
///
/// - **One hold per owner.** A handle with no owner of its own takes each hold under a fresh
///   owner, so two acquisitions exclude each other, in one task as in two processes. A
///   handle bound to an owner ([`owned_by`](Self::owned_by)) that holds the mutex already is
///   refused with [`Error::WouldDeadlock`]: it never waits on itself.
/// - **Leases, the watchdog and the loss signal** as every ferrisson lock: the guard's
///   [`lost`](ferrisson_core::HoldGuard::lost) fires before the lease can have run out, and a
///   fixed lease can be [extended](ferrisson_core::HoldGuard::extend).
/// - **Fencing**, opt-in ([`fenced`](Self::fenced)): tokens from a counter of its own, issued
///   in the same script call as the hold.
/// - **Waiting.** Waiters of one client queue in arrival order, and a release hands the mutex
///   to the first of them in the same call (the value swapped to its token), up to the streak
///   limit every lock has. Across clients a release publishes on
///   `ferrisson_mutex__channel:{name}`, which wakes one waiter, while a waiter is marked: a
///   waiter's try in vain sets a key of that name for a second, so that a mutex nobody waits
///   for costs no publish. Releases of other Redlock clients publish nothing: behind their
///   token (no ferrisson owner) a waiter does not mark, and its next try asks Redis to tell it
///   of the key's next change (`CLIENT TRACKING`, redirected to the client's subscriber
///   connection), so it sends nothing until the release
///   ([`ClientConfig::with_tracked_waits`](ferrisson_core::ClientConfig::with_tracked_waits);
///   it looks again every 3 s as a net, counted in
///   [`Client::tracking_stats`](ferrisson_core::Client::tracking_stats)). On a cluster, or
///   without the rights `client|tracking` and `client|caching`, it looks again on its own, 100
///   ms after a try in vain, then every 200 ms ([`FOREIGN_RELEASE_RECHECK`]), as often as those
///   clients poll themselves.
/// - **Lost replies.** A retried acquire finds its own token (the layout needs no latch
///   key). A release whose reply was lost is sent again and reads the value: when the resend
///   finds the key gone, the first call freed it or the lease had run out before it, which the
///   layout cannot tell apart, and the release reports the mutex as not held
///   ([`Error::NotOwner`] from [`unlock`](ferrisson_core::HoldGuard::unlock)); it never
///   reports a hold that was lost before the release as released. Not covered: a first copy
///   of a resent call held up on a connection the client gave up on, reaching Redis late.
///   Such a copy of the plain first try can take the mutex for one lease under a finished
///   hold's token, and one of a release under a bound owner frees that owner's next hold
///   (docs/protocol.md, "\[ext\] Retry records").
///
/// # Cancel safety
///
/// As every lock's: a dropped acquire gives back a hold its call may have taken (a release
/// queued behind it), a dropped release is sent again in the background, and a hand-off that
/// reached no waiter is undone; at worst a hold stays until its lease ends.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = ferrisson_testkit::RedisServer::spawn();
/// # let client = ferrisson_core::Client::connect(&server.url()).await?;
/// use ferrisson_lock::{Lock, Mutex};
///
/// let mutex = Mutex::new(&client, "payments:42")?;
/// let guard = mutex.lock().await?;
/// assert!(mutex.try_lock().await?.is_none());
/// guard.unlock().await?;
///
/// // Fenced, its tokens are plain u64s (a `FencedMutex`, which is `Mutex::fenced` underneath).
/// let fenced = ferrisson_lock::FencedMutex::new(&client, "ledger")?;
/// let first = fenced.lock().await?;
/// let token: u64 = first.token();
/// first.unlock().await?;
/// assert!(fenced.lock().await?.token() > token);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Mutex(LockHandle<MutexKind>);

/// How a waiter looks again for a release that published nothing (another Redlock client's)
/// when Redis cannot tell it (a cluster, no `client|tracking` right, tracked waits off): as
/// often as those clients poll (rslock, node-redlock and redis-py's `Lock` try again every
/// 100 to 200 ms). Not sooner: a waiter behind ferrisson holders is woken by their release
/// messages, and each re-check is a command (starting at 20 ms cost 2.6 more commands per
/// acquisition under the bench's contention with 1 ms holds).
pub const FOREIGN_RELEASE_RECHECK: Backoff = Backoff {
    min: Duration::from_millis(100),
    max: Duration::from_millis(200),
};

/// How long a waiter's mark lives (`ferrisson_mutex__channel:{name}` as a key: while it does,
/// releases publish): several of its re-checks, each of which marks again.
const WAITER_MARK: Duration = Duration::from_secs(1);

/// The mutex's key, channel and (fenced) counter, as the engine's kind.
pub struct MutexKind {
    /// The client, the key and fencing (no record: a resend reads the key's own state).
    names: LockNames,
    channel: String,
    /// The fencing counter, `ferrisson_mutex_token:{name}`, when fenced.
    token_key: Option<String>,
}

impl std::ops::Deref for MutexKind {
    type Target = LockNames;

    fn deref(&self) -> &LockNames {
        &self.names
    }
}

impl Mutex {
    /// A handle to the mutex named `name` (after the client's namespace prefix).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when `name` is empty.
    pub fn new(client: &Client, name: &str) -> Result<Self> {
        Self::with_fencing(client, name, false)
    }

    /// A handle to the mutex named `name` whose acquisitions hand out fencing tokens
    /// ([`HoldGuard::token`](ferrisson_core::HoldGuard::token)), from the counter
    /// `ferrisson_mutex_token:{name}` in the same script call as the hold. Tokens only grow,
    /// across a restart without persistence or a failover too (the rule of
    /// [`docs/guarantees.md`](https://github.com/ferrisson/ferrisson/blob/main/docs/guarantees.md) §9); each acquire is a script call instead of a plain `SET`.
    /// Fenced and unfenced handles of one name exclude each other; only fenced ones move the
    /// counter. [`FencedMutex`](crate::FencedMutex) is this with tokens as plain `u64`s.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when `name` is empty.
    pub fn fenced(client: &Client, name: &str) -> Result<Self> {
        Self::with_fencing(client, name, true)
    }

    fn with_fencing(client: &Client, name: &str, fenced: bool) -> Result<Self> {
        let names = LockNames::new(client, name, fenced, false)?;
        let key = &names.key;
        let channel = prefixed("ferrisson_mutex__channel", key);
        let token_key = fenced.then(|| prefixed("ferrisson_mutex_token", key));
        client.check_same_slot(key, &[&channel])?;
        if let Some(token_key) = &token_key {
            client.check_same_slot(key, &[token_key])?;
        }
        Ok(Self(LockHandle::new(MutexKind {
            names,
            channel,
            token_key,
        })))
    }

    /// This mutex, acquired and queried as `owner` instead of a fresh owner per acquisition.
    #[must_use]
    pub fn owned_by(&self, owner: Owner) -> Self {
        Self(self.0.owned_by(owner))
    }
}

impl LockType for Mutex {
    type Kind = MutexKind;

    fn handle(&self) -> &LockHandle<MutexKind> {
        &self.0
    }
}

impl MutexKind {
    /// `call` with the publish command as its next argument when it is not `publish`, the
    /// scripts' default (each argument costs Redis a little).
    fn with_publish(&self, call: ScriptCall) -> ScriptCall {
        match self.client.config().publish_command().as_str() {
            "publish" => call,
            publish => call.arg(publish),
        }
    }

    fn reentered(&self, owner: &Owner) -> Error {
        Error::WouldDeadlock(format!(
            "{owner} holds the mutex `{}` already: a mutex is not reentrant",
            self.key
        ))
    }
}

impl HoldKind for MutexKind {
    fn names(&self) -> &LockNames {
        &self.names
    }

    fn kind_name(&self) -> &'static str {
        "mutex"
    }

    fn renew_script(&self) -> &'static Script {
        &MUTEX_RENEW
    }

    fn waiting(&self, _owner: &Owner) -> Waiting<'_> {
        Waiting {
            channel: Cow::Borrowed(&self.channel),
            policy: lock_message_policy,
            recheck: FOREIGN_RELEASE_RECHECK,
            spin: None,
            interest: u64::MAX,
        }
    }

    fn hands_off(&self) -> bool {
        true
    }

    fn try_call(&self, args: &TryArgs<'_>) -> ScriptCall {
        let (owner, lease) = (args.owner.as_str(), millis(args.lease));
        let call = match &self.token_key {
            // The standard acquire, and with GET the holder's token when it fails.
            None if !args.retry && !args.subscribed && self.client.has_redis_7_commands() => {
                return ScriptCall::plain(&MUTEX_ACQUIRE, "SET", &[&self.key])
                    .arg(owner)
                    .arg("NX")
                    .arg("PX")
                    .arg(lease)
                    .arg("GET");
            }
            None => ScriptCall::new(
                &MUTEX_ACQUIRE,
                &[&self.key, &self.channel, self.names.undone_key()],
            ),
            Some(token_key) => ScriptCall::new(
                &MUTEX_ACQUIRE,
                &[&self.key, &self.channel, self.names.undone_key(), token_key],
            ),
        };
        // A waiter's failed try marks that someone waits, so that releases publish; its
        // successful one says the mutex was taken, so that the waiters other clients let the
        // release pass for do not try it in vain (`TAKEN_MESSAGE`).
        let flags = match (args.retry, args.subscribed) {
            (true, true) => "rw",
            (true, false) => "r",
            (false, true) => "w",
            (false, false) => "",
        };
        let call = call.arg(lease).arg(owner).arg(flags).arg(args.seq);
        // Behind another Redlock client's hold, whose release publishes nothing: Redis tells
        // the waiter of the key's next change instead.
        let call = match args.track {
            Some(armed) => call.tracked(armed),
            None => call,
        };
        if !args.subscribed {
            return call;
        }
        self.with_publish(call.arg(millis(WAITER_MARK)))
    }

    fn read_try(&self, owner: &Owner, reply: &redis::Value) -> Result<TryReply> {
        match reply {
            // `SET … NX GET`: nil when it set the key, else the holder's token.
            redis::Value::Nil => Ok(TryReply::Taken {
                held: 1,
                token: None,
            }),
            redis::Value::BulkString(held) if held == owner.as_str().as_bytes() => {
                Err(self.reentered(owner))
            }
            redis::Value::BulkString(held) => Ok(TryReply::Busy {
                ttl_ms: -1,
                foreign: !is_owner_token(held),
            }),
            _ => read_script_try(self, owner, reply),
        }
    }

    fn refusal(&self, owner: &Owner, reply: &[i64]) -> Option<Error> {
        (reply == [-1]).then(|| self.reentered(owner))
    }

    fn release_call(&self, args: &ReleaseArgs<'_>) -> ScriptCall {
        let owner = args.owner.as_str();
        if let Some((successor, lease)) = args.successor {
            let call = match &self.token_key {
                Some(token_key) => ScriptCall::new(&MUTEX_HAND_OFF, &[&self.key, token_key]),
                None => ScriptCall::new(&MUTEX_HAND_OFF, &[&self.key]),
            };
            return call.arg(owner).arg(successor.as_str()).arg(millis(lease));
        }
        let call = ScriptCall::new(&MUTEX_RELEASE, &[&self.key, &self.channel]).arg(owner);
        // This client's own waiters (which may not have marked) are woken whatever the mark
        // says.
        if args.local_waiters {
            call.arg(self.client.config().publish_command().as_str())
                .arg("1")
        } else {
            self.with_publish(call)
        }
    }
}

impl LockKind for MutexKind {
    async fn force_unlock(&self) -> Result<bool> {
        let call = ScriptCall::new(&MUTEX_FORCE_RELEASE, &[&self.key, &self.channel])
            .arg(self.client.config().publish_command().as_str());
        Ok(self.client.eval::<i64>(&call).await? == 1)
    }

    async fn hold_count_of(&self, owner: &Owner) -> Result<u32> {
        let token: Option<String> = self.client.query(redis::cmd("GET").arg(&*self.key)).await?;
        Ok(u32::from(token.as_deref() == Some(owner.as_str())))
    }

    fn object_keys(&self) -> ObjectKeys<'_> {
        // The waiter mark goes with a delete (it keeps its own short expiry).
        let mut extra = vec![self.channel.as_str()];
        extra.extend(self.token_key.as_deref());
        ObjectKeys::new(&self.client, KeyShape::Value, vec![&self.key])
            .with_counters(extra)
            .waking(&self.channel, "0")
    }

    fn release_channel(&self) -> Option<&str> {
        Some(&self.channel)
    }

    fn watch_recheck(&self) -> Option<Duration> {
        // Other Redlock clients' releases publish nothing.
        Some(FOREIGN_RELEASE_RECHECK.max)
    }

    async fn watch_look(&self) -> Result<Option<Option<Duration>>> {
        // A watcher marks that someone waits, as a waiter's failed try does, so that the next
        // release publishes: otherwise it would learn of it only at its re-check (a RedLock's
        // rounds never wait on an instance, so they never mark). Sent before the look on the
        // same connection: one round trip.
        let mut mark = redis::cmd("SET");
        mark.arg(&self.channel)
            .arg("1")
            .arg("PX")
            .arg(millis(WAITER_MARK));
        let (marked, held) = futures::join!(self.client.query::<()>(&mark), self.held_for());
        marked?;
        held
    }
}
