//! The lean mutex: one lock kind on the standard Redlock layout, plugged into the engine.

use std::borrow::Cow;
use std::sync::Arc;

use ferrisson_core::__engine::keys::prefixed;
use ferrisson_core::__engine::{
    ClientEngine, HoldKind, LockHandle, LockKind, LockType, ReleaseArgs, Script, ScriptCall,
    TryArgs, Waiting, lock_message_policy,
};
use ferrisson_core::{Client, Error, KeyShape, ObjectKeys, Owner, Result};

use crate::scripts::{MUTEX_ACQUIRE, MUTEX_FORCE_RELEASE, MUTEX_RELEASE, MUTEX_RENEW};

/// A non-reentrant distributed mutex on the standard Redlock layout (**\[ext\]**, ferrisson's
/// extension): the key holds the holder's token and nothing else, as with rslock, redsync,
/// node-redlock and redis-py's `Lock`. The leanest lock ferrisson ships: one string per lock,
/// no latch or counter keys.
///
/// - **One hold per owner.** A handle with no owner of its own takes each hold under a fresh
///   owner, so two acquisitions exclude each other, in one task as in two processes. A
///   handle bound to an owner ([`owned_by`](Self::owned_by)) that holds the mutex already is
///   refused with [`Error::WouldDeadlock`]: it never waits on itself.
/// - **Leases, the watchdog and the loss signal** as every ferrisson lock: the guard's
///   [`lost`](ferrisson_core::HoldGuard::lost) fires before the lease can have run out.
/// - **Waiting** sleeps on the release channel `ferrisson_mutex__channel:{name}`; releases of
///   other Redlock clients publish nothing, so a waiter also looks again when the holder's
///   lease ends.
/// - **A release whose reply was lost** is sent again; the layout keeps no record of
///   releases, so when the resend finds the key gone the guard reports the mutex as not held
///   (it cannot tell a release from an expiry, and never reports a lost hold as released).
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
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Mutex(LockHandle<MutexKind>);

/// The mutex's key and channel, as the engine's kind.
pub struct MutexKind {
    client: Client,
    key: Arc<str>,
    channel: String,
}

impl Mutex {
    /// A handle to the mutex named `name` (after the client's namespace prefix).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when `name` is empty.
    pub fn new(client: &Client, name: &str) -> Result<Self> {
        let key = client.object_key(name)?;
        let channel = prefixed("ferrisson_mutex__channel", &key);
        client.check_same_slot(&key, &[&channel])?;
        Ok(Self(LockHandle::new(MutexKind {
            client: client.clone(),
            key: key.into(),
            channel,
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

impl HoldKind for MutexKind {
    fn client(&self) -> &Client {
        &self.client
    }

    fn kind_name(&self) -> &'static str {
        "mutex"
    }

    fn lock_key(&self) -> &Arc<str> {
        &self.key
    }

    fn renew_script(&self) -> &'static Script {
        &MUTEX_RENEW
    }

    fn fenced(&self) -> bool {
        false
    }

    fn waiting(&self, _owner: &Owner) -> Waiting<'_> {
        Waiting {
            channel: Cow::Borrowed(&self.channel),
            policy: lock_message_policy,
            recheck: self.client.config().lease(),
            spin: None,
        }
    }

    fn try_call(&self, args: &TryArgs<'_>) -> ScriptCall {
        let call = ScriptCall::new(&MUTEX_ACQUIRE, &[&self.key])
            .arg(ferrisson_core::__engine::time::millis(args.lease))
            .arg(args.owner.as_str());
        if args.retry { call.arg("1") } else { call }
    }

    fn refusal(&self, owner: &Owner, reply: &[i64]) -> Option<Error> {
        (reply == [-1]).then(|| {
            Error::WouldDeadlock(format!(
                "{owner} holds the mutex `{}` already: a mutex is not reentrant",
                self.key
            ))
        })
    }

    fn release_call(&self, args: &ReleaseArgs<'_>) -> ScriptCall {
        ScriptCall::new(&MUTEX_RELEASE, &[&self.key, &self.channel])
            .arg(args.owner.as_str())
            .arg(self.client.config().publish_command().as_str())
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
        ObjectKeys::new(&self.client, KeyShape::Value, vec![&self.key]).waking(&self.channel, "0")
    }

    fn release_channel(&self) -> Option<&str> {
        Some(&self.channel)
    }
}
