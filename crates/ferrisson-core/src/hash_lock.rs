//! Redisson's `RLock` hash layout (`owner → hold count`), which several lock kinds share: the
//! reentrant and spin locks take and release it ([`HashLock`]), the fair lock and the read-write
//! lock renew or force-release their hashes with its scripts. A layout, not a kind: each kind
//! crate decides how it waits and what it publishes.

use crate::client::Client;
use crate::error::Result;
use crate::script::Script;

/// The watchdog's renewal script for locks held in a hash (`owner → count`): the reentrant
/// lock's and the fair lock's (`lua/core/renew_hash.lua`).
pub static RENEW_HASH: Script =
    Script::new("core/renew_hash", include_str!("../lua/renew_hash.lua"));

/// Force release of a lock kept in a hash, whoever holds it (`lua/core/force_release_hash.lua`):
/// the reentrant lock's (message `0`) and the read-write lock's (message `1`).
pub static FORCE_RELEASE_HASH: Script = Script::with_prelude(
    "core/force_release_hash",
    &crate::script::LOCK_PRELUDE,
    include_str!("../lua/force_release_hash.lua"),
);

/// Take or re-enter a lock kept in a hash (`lua/core/hash_lock_acquire.lua`): the reentrant
/// lock's and the spin lock's acquire.
pub static HASH_LOCK_ACQUIRE: Script = Script::with_two_preludes(
    "core/hash_lock_acquire",
    &crate::script::LOCK_PRELUDE,
    &crate::script::MARKS_PRELUDE,
    include_str!("../lua/hash_lock_acquire.lua"),
);

/// Release one hold of a lock kept in a hash (`lua/core/hash_lock_release.lua`): the reentrant
/// lock's (which publishes and hands off) and the spin lock's (which does neither).
pub static HASH_LOCK_RELEASE: Script = Script::with_prelude(
    "core/hash_lock_release",
    &crate::script::RELEASE_PRELUDE,
    include_str!("../lua/hash_lock_release.lua"),
);

/// The keys and script calls of a lock kept in a hash on Redisson's `RLock` layout, shared by
/// the reentrant lock and the spin lock: the hash `name`, the channel
/// `redisson_lock__channel:{name}`, the fencing counter `redisson_lock_token:{name}` and the
/// client's record on the lock ([docs/protocol.md](https://github.com/ferrisson/ferrisson/blob/main/docs/protocol.md), "\[ext\] Retries").
#[derive(Debug, Clone)]
pub struct HashLock {
    /// The client, the hash, fencing and the client's record on the lock, where its releases
    /// record what they did (what every lock kind names alike; a `HashLock` derefs to them).
    pub names: crate::kind::LockNames,
    /// The release channel and the fencing counter, one after the other in one allocation
    /// ([`channel`](Self::channel), [`token_key`](Self::token_key)): a handle is often made
    /// per task, and a waiter keeps its handle for as long as it waits.
    derived: String,
    /// Where the fencing counter starts in `derived`.
    token_at: usize,
    /// The acquire script ([`HASH_LOCK_ACQUIRE`] unless [`with_acquire`](Self::with_acquire)).
    acquire: &'static Script,
}

impl std::ops::Deref for HashLock {
    type Target = crate::kind::LockNames;

    fn deref(&self) -> &crate::kind::LockNames {
        &self.names
    }
}

impl HashLock {
    /// The keys of the lock named `name` (after the client's namespace prefix), handing out
    /// fencing tokens when `fenced`.
    ///
    /// # Errors
    ///
    /// [`crate::Error::InvalidArgument`] for a name the client refuses.
    pub fn new(client: &Client, name: &str, fenced: bool) -> Result<Self> {
        use crate::keys::prefixed;
        let names = crate::kind::LockNames::new(client, name, fenced, true)?;
        let mut derived = prefixed("redisson_lock__channel", &names.key);
        let token_at = derived.len();
        derived.push_str(&prefixed("redisson_lock_token", &names.key));
        derived.shrink_to_fit();
        Ok(Self {
            names,
            derived,
            token_at,
            acquire: &HASH_LOCK_ACQUIRE,
        })
    }

    /// This layout with an acquire script of a kind's own, which takes the arguments and keys
    /// of [`HASH_LOCK_ACQUIRE`] and replies as it does, or refuses: a kind on Redisson's `RLock`
    /// hash that differs only in how it takes it (a non-reentrant lock's script replies `-2`
    /// when the owner holds the lock already, which the engine makes
    /// [`Error::WouldDeadlock`](crate::Error::WouldDeadlock); see
    /// [`TryReply::read`](crate::kind::TryReply::read)). Everything else (release, renewal,
    /// force unlock, hand-off, inspection) stays this layout's.
    #[must_use]
    pub fn with_acquire(mut self, script: &'static Script) -> Self {
        self.acquire = script;
        self
    }

    /// The release channel, `redisson_lock__channel:{name}`.
    pub fn channel(&self) -> &str {
        self.derived.get(..self.token_at).unwrap_or_default()
    }

    /// The fencing counter, `redisson_lock_token:{name}`.
    pub fn token_key(&self) -> &str {
        self.derived.get(self.token_at..).unwrap_or_default()
    }

    /// The acquire call (`core/hash_lock_acquire`, or the kind's own script): the fencing counter and the believed
    /// hold count go only where they are read (a fenced lock, a retry).
    pub fn try_call(&self, args: &crate::kind::TryArgs<'_>) -> crate::script::ScriptCall {
        let (token_key, undone) = (self.token_key(), self.undone_key());
        let keys: &[&str] = if self.fenced {
            &[&self.key, undone, token_key]
        } else {
            &[&self.key, undone]
        };
        let call = crate::script::ScriptCall::new(self.acquire, keys)
            .arg(crate::time::millis(args.lease))
            .arg(args.owner.as_str())
            .arg(args.seq);
        if args.retry {
            call.arg(args.believed)
        } else {
            call
        }
    }

    /// The release call (`core/hash_lock_release`); without `publish`, it publishes nothing
    /// (the spin lock, whose waiters poll). A free carries six arguments; the flags and the
    /// successor follow only when there are any.
    pub fn release_call(
        &self,
        args: &crate::kind::ReleaseArgs<'_>,
        publish: bool,
    ) -> crate::script::ScriptCall {
        let command = if publish {
            self.client.config().publish_command().as_str()
        } else {
            ""
        };
        let call =
            crate::script::ScriptCall::new(&HASH_LOCK_RELEASE, &[&self.key, self.record_key()])
                .arg(args.owner.as_str())
                .arg(command)
                .arg(args.renew_lease.map_or(0, crate::time::millis));
        let Some(record) = args.record else {
            return call;
        };
        match args.successor {
            Some((successor, lease)) => {
                let fenced = if self.fenced { "f" } else { "" };
                record
                    .args_flagged(call, &self.client, args.retry, fenced)
                    .arg(successor.as_str())
                    .arg(crate::time::millis(lease))
            }
            None => record.args(call, &self.client, args.retry),
        }
    }

    /// The lock's keys for [`SyncObject`]: the hash, the fencing counter, and (when its
    /// releases publish) the release channel, whose `0` wakes waiters after a delete.
    pub fn object_keys(&self, publish: bool) -> crate::object::ObjectKeys<'_> {
        let keys = crate::object::ObjectKeys::new(
            &self.client,
            crate::object::KeyShape::Lock,
            vec![&self.key],
        )
        .with_counters(vec![self.token_key()]);
        if publish {
            keys.waking(self.channel(), "0")
        } else {
            keys
        }
    }

    /// Releases the lock whoever holds it, publishing `0`; whether it was locked.
    ///
    /// # Errors
    ///
    /// [`crate::Error::WrongType`], [`crate::Error::Redis`].
    pub async fn force_unlock(&self) -> Result<bool> {
        use crate::client::ClientEngine;
        let call =
            crate::script::ScriptCall::new(&FORCE_RELEASE_HASH, &[&self.key, self.channel()])
                .arg(self.client.config().publish_command().as_str())
                .arg("0");
        let released: i64 = self.client.eval(&call).await?;
        Ok(released == 1)
    }
}

/// The reentrant lock's kind (Redisson's `RLock`, fenced or not): what `ferrisson-lock`'s
/// `ReentrantLock` is a handle of. Its scripts are this layout's, so its calls never leave the
/// core: an acquisition goes from the public call to the connection in this crate.
impl crate::handle::LockKind for HashLock {
    fn force_unlock(&self) -> impl std::future::Future<Output = Result<bool>> + Send {
        HashLock::force_unlock(self)
    }

    fn object_keys(&self) -> crate::object::ObjectKeys<'_> {
        HashLock::object_keys(self, true)
    }

    fn release_channel(&self) -> Option<&str> {
        Some(self.channel())
    }
}

impl crate::kind::HoldKind for HashLock {
    fn names(&self) -> &crate::kind::LockNames {
        &self.names
    }

    fn renew_script(&self) -> &'static Script {
        &RENEW_HASH
    }

    fn waiting(&self, _owner: &crate::Owner) -> crate::kind::Waiting<'_> {
        crate::kind::Waiting {
            channel: std::borrow::Cow::Borrowed(self.channel()),
            policy: crate::pubsub::lock_message_policy,
            recheck: crate::Backoff::fixed(self.client.config().lease()),
            spin: None,
            interest: u64::MAX,
        }
    }

    fn hands_off(&self) -> bool {
        true
    }

    fn try_call(&self, args: &crate::kind::TryArgs<'_>) -> crate::script::ScriptCall {
        HashLock::try_call(self, args)
    }

    fn release_call(&self, args: &crate::kind::ReleaseArgs<'_>) -> crate::script::ScriptCall {
        HashLock::release_call(self, args, true)
    }
}
