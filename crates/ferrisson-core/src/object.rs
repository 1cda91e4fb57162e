//! [`SyncObject`]: what every synchronizer offers on its Redis keys, as Redisson's `RObject`
//! and `RExpirable` do on every object: whether it exists, its time to live, setting or
//! clearing an expiry, and deleting it.

use std::future::Future;
use std::time::Duration;

use crate::client::Client;
use crate::client::ClientEngine;
use crate::error::Result;
use crate::script::{LOCK_PRELUDE, Script, ScriptCall};

/// What a synchronizer's main key must hold for [`SyncObject::expire`],
/// [`clear_expire`](SyncObject::clear_expire) and [`delete`](SyncObject::delete) to touch it:
/// a key of any other shape is someone else's data, refused with
/// [`Error::WrongType`](crate::Error::WrongType), and nothing changes. The shapes are Redis
/// layouts, not kinds: a new kind on one of them needs no new shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyShape {
    /// A reentrant, fair or spin lock's hash (`owner → count`).
    Lock,
    /// A read-write lock's hash (a `mode` field, then owners).
    ReadWriteLock,
    /// A string holding an integer: a semaphore's permits, a latch's count.
    Count,
    /// A string of any content: a token (the lean `Mutex`'s holder, on the standard Redlock
    /// layout).
    Value,
    /// A hash whose fields are all among these names (comma-separated, e.g. a rate limiter's
    /// settings: `"rate,interval,type,keepAliveTime"`), each holding a number.
    NumberHash(&'static str),
}

impl KeyShape {
    /// The shape as the scripts take it (`foreign_object` in `lua/core/lock_prelude.lua`):
    /// `lock`, `rwlock`, `count`, `value`, or `numbers:` and the field names.
    pub fn as_arg(self) -> std::borrow::Cow<'static, str> {
        std::borrow::Cow::Borrowed(match self {
            Self::Lock => "lock",
            Self::ReadWriteLock => "rwlock",
            Self::Count => "count",
            Self::Value => "value",
            Self::NumberHash(fields) => return format!("numbers:{fields}").into(),
        })
    }
}

/// The keys of a synchronizer, as [`SyncObject`] works on them.
#[derive(Debug, Clone)]
pub struct ObjectKeys<'a> {
    /// The client the synchronizer runs on.
    pub(crate) client: &'a Client,
    /// What the main key must hold.
    pub(crate) shape: KeyShape,
    /// Every key the synchronizer keeps its state in, the main key first: an expiry is set on
    /// and cleared from all of them, and `delete` deletes them.
    pub(crate) state: Vec<&'a str>,
    /// Counters deleted with the synchronizer but never given an expiry: a fencing counter,
    /// which must outlive every hold so that tokens only grow.
    pub(crate) counters: Vec<&'a str>,
    /// The channel and message that wake the synchronizer's waiters once it is deleted, so that
    /// they look again instead of sleeping out their recheck.
    pub(crate) wake: Option<(&'a str, &'static str)>,
}

impl<'a> ObjectKeys<'a> {
    /// The keys of a synchronizer on `client` whose state lives in `state` (the main key
    /// first), with no counters and no wake-up message.
    pub fn new(client: &'a Client, shape: KeyShape, state: Vec<&'a str>) -> Self {
        Self {
            client,
            shape,
            state,
            counters: Vec::new(),
            wake: None,
        }
    }

    /// These keys, and `counters` deleted with them (never given an expiry).
    pub fn with_counters(mut self, counters: Vec<&'a str>) -> Self {
        self.counters = counters;
        self
    }

    /// These keys, and `message` published on `channel` after a delete.
    pub fn waking(mut self, channel: &'a str, message: &'static str) -> Self {
        self.wake = Some((channel, message));
        self
    }

    fn main(&self) -> &str {
        self.state.first().copied().unwrap_or_default()
    }
}

/// Expiry of every state key of a synchronizer (`lua/core/object_expire.lua`).
pub static OBJECT_EXPIRE: Script = Script::with_prelude(
    "core/object_expire",
    &LOCK_PRELUDE,
    include_str!("../lua/object_expire.lua"),
);

/// Reading a synchronizer's main key, refusing someone else's data (`lua/core/object_state.lua`).
pub static OBJECT_STATE: Script = Script::with_prelude(
    "core/object_state",
    &LOCK_PRELUDE,
    include_str!("../lua/object_state.lua"),
);

/// Deleting a synchronizer (`lua/core/object_delete.lua`).
pub static OBJECT_DELETE: Script = Script::with_prelude(
    "core/object_delete",
    &LOCK_PRELUDE,
    include_str!("../lua/object_delete.lua"),
);

/// What every synchronizer offers on its Redis keys (Redisson's `RObject` and `RExpirable`):
/// whether it exists, how long it has to live, an expiry set or cleared on all of its keys at
/// once, and deleting it. Every lock kind, both semaphores, the countdown latch and the rate
/// limiter implement it; bring it into scope to call its methods
/// (`use ferrisson::SyncObject;`).
///
/// An expiry covers every key the synchronizer keeps state in (a fair lock's queue too, a
/// permit-expirable semaphore's permit set), never its fencing counter. On a lock that is held
/// the watchdog sets the lease again at its next renewal, as Redisson's does: an expiry is for
/// objects at rest (a semaphore or latch set up for one job, to vanish after it).
///
/// ```
/// use std::time::Duration;
/// use ferrisson_core::SyncObject;
///
/// // Any synchronizer will do: a job's semaphore, latch or lock, gone a day after the job.
/// async fn retire(object: &impl SyncObject) -> ferrisson_core::Result<()> {
///     if object.exists().await? {
///         object.expire(Duration::from_secs(24 * 3600)).await?;
///     }
///     Ok(())
/// }
/// ```
pub trait SyncObject: Send + Sync {
    /// Whether the synchronizer exists in Redis: a lock is held, a semaphore's or latch's
    /// count is set, a rate limiter's rate is set (Redisson's `isExists`).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`](crate::Error::WrongType) when the main key holds someone else's
    /// data, [`Error::Redis`](crate::Error::Redis).
    fn exists(&self) -> impl Future<Output = Result<bool>> + Send;

    /// The time left before the synchronizer's main key expires (a lock's lease, or an expiry
    /// set with [`expire`](Self::expire)); `None` when it does not exist or has no expiry
    /// (Redisson's `remainTimeToLive`, whose -2 and -1 are both `None`; [`exists`](Self::exists)
    /// tells them apart).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`](crate::Error::WrongType) when the main key holds someone else's
    /// data, [`Error::Redis`](crate::Error::Redis).
    fn remaining_ttl(&self) -> impl Future<Output = Result<Option<Duration>>> + Send;

    /// Makes every state key of the synchronizer expire `ttl` from now (Redisson's `expire`);
    /// `true` when it exists (any of its keys got the expiry).
    ///
    /// # Cancel safety
    ///
    /// The expiry is set on all keys or on none (one script); a dropped call may or may not
    /// have set it.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a `ttl` under one
    /// millisecond or over [`MAX_LEASE`](crate::duration::MAX_LEASE) (nothing is sent),
    /// [`Error::WrongType`](crate::Error::WrongType) when the main key holds someone else's
    /// data, [`Error::Redis`](crate::Error::Redis).
    fn expire(&self, ttl: Duration) -> impl Future<Output = Result<bool>> + Send;

    /// Removes the expiry from every state key of the synchronizer (Redisson's
    /// `clearExpire`); `true` when one had an expiry. On a held lock the next renewal sets
    /// the lease again.
    ///
    /// # Cancel safety
    ///
    /// As [`expire`](Self::expire).
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`](crate::Error::WrongType), [`Error::Redis`](crate::Error::Redis).
    fn clear_expire(&self) -> impl Future<Output = Result<bool>> + Send;

    /// Deletes the synchronizer: every state key and its counters, whatever holds or permits
    /// it had (holders' guards signal the loss at their next renewal), then wakes its waiters
    /// so that they look again (Redisson's `delete`). `true` when it existed.
    ///
    /// # Cancel safety
    ///
    /// All or nothing (one script); a dropped call may or may not have deleted it.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`](crate::Error::WrongType) when the main key holds someone else's
    /// data (nothing is deleted), [`Error::Redis`](crate::Error::Redis).
    fn delete(&self) -> impl Future<Output = Result<bool>> + Send;
}

/// What the engine needs of a synchronizer to give it [`SyncObject`]'s calls: its keys (its
/// crate implements this; users never do).
pub trait ObjectLayout: Send + Sync {
    /// The synchronizer's keys, as [`SyncObject`]'s calls work on them.
    fn object_keys(&self) -> ObjectKeys<'_>;

    /// [`SyncObject::delete`]: by default `core/object_delete` over
    /// [`object_keys`](Self::object_keys); a kind whose deletion is a script of its own (the
    /// latch's, which remembers the round it ends) says so here.
    fn delete_object(&self) -> impl Future<Output = Result<bool>> + Send {
        let keys = self.object_keys();
        async move { object_delete(&keys).await }
    }
}

impl<T: ObjectLayout> SyncObject for T {
    fn exists(&self) -> impl Future<Output = Result<bool>> + Send {
        let keys = self.object_keys();
        async move { Ok(object_state(&keys, "").await?.exists) }
    }

    fn remaining_ttl(&self) -> impl Future<Output = Result<Option<Duration>>> + Send {
        let keys = self.object_keys();
        async move { Ok(object_state(&keys, "").await?.ttl()) }
    }

    fn expire(&self, ttl: Duration) -> impl Future<Output = Result<bool>> + Send {
        let keys = self.object_keys();
        async move {
            crate::duration::validate_lease("a time to live", ttl)?;
            object_expire(&keys, Some(ttl)).await
        }
    }

    fn clear_expire(&self) -> impl Future<Output = Result<bool>> + Send {
        let keys = self.object_keys();
        async move { object_expire(&keys, None).await }
    }

    fn delete(&self) -> impl Future<Output = Result<bool>> + Send {
        self.delete_object()
    }
}

/// A synchronizer's main key as [`OBJECT_STATE`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectState {
    /// Whether it exists.
    pub exists: bool,
    /// Its time to live in ms (`PTTL`: -1 without expiry, -2 missing).
    pub ttl_ms: i64,
    /// The hash field asked for (empty when absent or not asked).
    pub field: String,
    /// How many fields the hash has, when a field was asked for (else 0).
    pub fields: u64,
}

impl ObjectState {
    /// The time to live, `None` without one (or when missing).
    pub fn ttl(&self) -> Option<Duration> {
        u64::try_from(self.ttl_ms).ok().map(Duration::from_millis)
    }
}

/// Reads the synchronizer's main key (and the hash field `field`, unless empty), refusing a
/// key of another shape than `keys.shape`.
///
/// # Errors
///
/// [`Error::WrongType`](crate::Error::WrongType) for someone else's data,
/// [`Error::Redis`](crate::Error::Redis).
pub async fn object_state(keys: &ObjectKeys<'_>, field: &str) -> Result<ObjectState> {
    let call = ScriptCall::new(&OBJECT_STATE, &[keys.main()])
        .arg(keys.shape.as_arg())
        .arg(field);
    let (exists, ttl_ms, field, fields): (i64, i64, String, u64) =
        keys.client.eval_read(&call).await?;
    Ok(ObjectState {
        exists: exists == 1,
        ttl_ms,
        field,
        fields,
    })
}

async fn object_expire(keys: &ObjectKeys<'_>, ttl: Option<Duration>) -> Result<bool> {
    let call = ScriptCall::new(&OBJECT_EXPIRE, &keys.state)
        .arg(keys.shape.as_arg())
        .arg(if ttl.is_some() { "pexpire" } else { "persist" })
        .arg(ttl.map_or(0, crate::time::millis));
    let changed: i64 = keys.client.eval(&call).await?;
    Ok(changed == 1)
}

async fn object_delete(keys: &ObjectKeys<'_>) -> Result<bool> {
    let mut all: Vec<&str> = keys.state.iter().chain(&keys.counters).copied().collect();
    let (publish, message) = match keys.wake {
        Some((channel, message)) => {
            all.push(channel);
            (keys.client.config().publish_command().as_str(), message)
        }
        None => ("", ""),
    };
    let call = ScriptCall::new(&OBJECT_DELETE, &all)
        .arg(keys.shape.as_arg())
        .arg(keys.state.len())
        .arg(keys.counters.len())
        .arg(publish)
        .arg(message);
    let deleted: i64 = keys.client.eval(&call).await?;
    Ok(deleted == 1)
}
