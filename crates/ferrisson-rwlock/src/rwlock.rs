//! The read-write lock.

use std::sync::Arc;
use std::time::Duration;

use std::borrow::Cow;

use futures::future::BoxFuture;

use ferrisson_core::__engine::keys::{prefixed, suffixed};
use ferrisson_core::__engine::{
    ClientEngine, FORCE_RELEASE_HASH, HoldKind, LockHandle, LockKind, LockNames, LockType,
    ReleaseArgs, Script, ScriptCall, TryArgs, Waiting, lock_message_policy,
};
use ferrisson_core::__engine::{KeyShape, ObjectKeys, ObjectLayout};
use ferrisson_core::{Client, Error, Owner, Result, SyncObject};

use crate::scripts::{
    READ_ACQUIRE, READ_RELEASE, RENEW, WRITE_ACQUIRE, WRITE_LEAVE, WRITE_RELEASE,
};
#[cfg(doc)]
use ferrisson_core::Lock;

/// How long a waiting writer's intent lasts unless its next try renews it: new readers wait
/// while it lasts, so a writer that died stops holding them up this long after.
const WRITER_INTENT: Duration = Duration::from_secs(3);

/// How often a waiting writer tries again, renewing its intent.
const WRITER_RECHECK: Duration = Duration::from_secs(1);

/// A read-write distributed lock with Redisson's `RReadWriteLock` semantics and Redis layout:
/// many readers or one writer.
///
/// - **Both sides reentrant** per explicit [`Owner`] ([`owned_by`](Self::owned_by)); a handle
///   with no owner of its own takes every hold under a fresh owner, so two acquisitions never
///   share one. Downgrade and the upgrade check below need a bound owner.
/// - **Downgrade**: the writer may also take read holds; when its last write hold goes, the
///   lock passes to read mode and waiting readers are woken. **Upgrade** (a reader asking for
///   the write lock) is refused at once with [`Error::WouldDeadlock`]: it could only wait for
///   itself, where Redisson's `writeLock().lock()` by the reader blocks for ever (a
///   `try_lock` too, where Redisson's `tryLock` returns `false`). Each side answers
///   [`is_locked`](Lock::is_locked) and [`force_unlock`](Lock::force_unlock) for itself
///   (Redisson's `RReadLock` / `RWriteLock`: the read side is locked in read mode, and in write
///   mode while the writer holds a read too); the whole lock's are
///   [`is_locked`](Lock::is_locked) and [`force_unlock`](Lock::force_unlock).
/// - **Every read hold has its own lease key.** The watchdog renews an owner's own holds and
///   nobody else's, so the holds of a crashed client expire on their own while live readers
///   keep the lock, and a writer is let in once only dead readers are left.
/// - **Wake-ups**: a write release wakes every local waiter (readers may all enter), a release
///   of the last read hold wakes one (a writer may enter).
/// - **Loss and fencing**: both guards carry the loss signal; with [`fenced`](Self::fenced),
///   every write acquisition hands out a strictly increasing token.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = ferrisson_testkit::RedisServer::spawn();
/// # let client = ferrisson_core::Client::connect(&server.url()).await?;
/// use ferrisson_rwlock::{Lock, ReadWriteLock};
///
/// // Bound to one owner, so that the writer's read hold is a downgrade.
/// let lock = ReadWriteLock::fenced(&client, "catalog")?.owned_by(client.new_owner());
/// let write = lock.write_lock().lock().await?;
/// assert!(write.token().is_some());
/// // The writer may read too; its last write release leaves the lock in read mode.
/// let read = lock.read_lock().lock().await?;
/// write.unlock().await?;
/// assert_eq!(lock.mode().await?, Some(ferrisson_rwlock::Mode::Read));
/// read.unlock().await?;
/// assert!(!lock.is_locked().await?);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct ReadWriteLock {
    read: LockHandle<Side>,
    write: LockHandle<Side>,
}

impl std::fmt::Debug for ReadWriteLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shared = self.shared();
        f.debug_struct("ReadWriteLock")
            .field("key", &shared.key)
            .field("fenced", &shared.fenced)
            .field("owner", &self.owner())
            .finish()
    }
}

/// Which side holds a read-write lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Readers (and perhaps a writer's downgraded read holds).
    Read,
    /// A writer.
    Write,
}

/// The lock's names and client, shared by both sides.
pub struct RwShared {
    /// The client, the hash, fencing and the client's record on the lock, where releases of
    /// either side record what they did.
    names: LockNames,
    channel: String,
    token_key: String,
    /// `prefixed("redisson_rwlock_writer", key)`: set while a writer waits \[ext\].
    intent_key: String,
    /// `suffixed(key, "")` without its trailing `:`: read hold `i` of owner `o` has its lease
    /// key at `{hold_base}:{o}:rwlock_timeout:{i}`.
    hold_base: String,
}

impl std::ops::Deref for RwShared {
    type Target = LockNames;

    fn deref(&self) -> &LockNames {
        &self.names
    }
}

/// One side of the lock, as the engine's kind: what its guards release through.
pub struct Side {
    shared: Arc<RwShared>,
    write: bool,
}

impl ReadWriteLock {
    /// A handle to the read-write lock named `name` (after the client's namespace prefix).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when `name` is empty.
    pub fn new(client: &Client, name: &str) -> Result<Self> {
        Self::build(client, name, false)
    }

    /// As [`new`](Self::new), with a fencing token for every write acquisition (re-entries
    /// included), from the counter `redisson_lock_token:{name}`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when `name` is empty.
    pub fn fenced(client: &Client, name: &str) -> Result<Self> {
        Self::build(client, name, true)
    }

    fn build(client: &Client, name: &str, fenced: bool) -> Result<Self> {
        let names = LockNames::new(client, name, fenced, true)?;
        let key = &names.key;
        let mut hold_base = suffixed(key, "");
        hold_base.pop();
        let shared = Arc::new(RwShared {
            channel: prefixed("redisson_rwlock", key),
            token_key: prefixed("redisson_lock_token", key),
            intent_key: prefixed("redisson_rwlock_writer", key),
            hold_base,
            names,
        });
        Ok(Self {
            read: LockHandle::new(Side {
                shared: shared.clone(),
                write: false,
            }),
            write: LockHandle::new(Side {
                shared,
                write: true,
            }),
        })
    }

    fn shared(&self) -> &RwShared {
        &self.read.kind().shared
    }

    /// This lock, acquired and queried as `owner` instead of a fresh owner per acquisition:
    /// the same owner re-enters, downgrades, and is told an upgrade would deadlock.
    pub fn owned_by(&self, owner: Owner) -> Self {
        Self {
            read: self.read.owned_by(owner.clone()),
            write: self.write.owned_by(owner),
        }
    }

    /// The read side.
    pub fn read_lock(&self) -> ReadLock {
        SideLock { rw: self.clone() }
    }

    /// The write side.
    pub fn write_lock(&self) -> WriteLock {
        SideLock { rw: self.clone() }
    }

    /// The Redis key of the lock.
    pub fn key(&self) -> &str {
        &self.shared().key
    }

    /// The owner this handle acquires and queries as, when it has one of its own
    /// ([`owned_by`](Self::owned_by)); `None`: each acquire takes a fresh owner, so that no two
    /// acquisitions share a hold (see [`Owner`]). Downgrading (a writer taking a read hold)
    /// and the upgrade check need the same owner on both sides: bind one.
    pub fn owner(&self) -> Option<&Owner> {
        self.read.owner()
    }

    /// Whether anyone holds the lock, reader or writer.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] when the key holds someone else's data, [`Error::Redis`].
    pub async fn is_locked(&self) -> Result<bool> {
        self.exists().await
    }

    /// Which side holds the lock, if any.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] when the key holds someone else's data, [`Error::Redis`],
    /// [`Error::Protocol`] for a mode of neither kind.
    pub async fn mode(&self) -> Result<Option<Mode>> {
        Ok(self.shared().mode_and_ttl().await?.0)
    }

    /// Releases the lock whoever holds it (every reader and the writer) and wakes every
    /// waiter. Returns whether it was locked. Holders lose their holds; their guards' loss
    /// signal fires at the next renewal.
    ///
    /// # Cancel safety
    ///
    /// The release happens or not, as a whole.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] when the key holds something else than a lock, [`Error::Redis`].
    pub async fn force_unlock(&self) -> Result<bool> {
        self.shared().force_unlock_in(None).await
    }
}

impl RwShared {
    /// Which side holds the lock, if any, and the lock's TTL, in one read.
    async fn mode_and_ttl(&self) -> Result<(Option<Mode>, Option<std::time::Duration>)> {
        let (mode, ttl, _) = self.mode_ttl_fields().await?;
        Ok((mode, ttl))
    }

    /// Which side holds the lock, if any, the lock's TTL and how many fields its hash has, in
    /// one read.
    async fn mode_ttl_fields(&self) -> Result<(Option<Mode>, Option<std::time::Duration>, u64)> {
        let state = ferrisson_core::__engine::object_state(&self.object_keys(), "mode").await?;
        let mode = match state.field.as_str() {
            "" => None,
            "read" => Some(Mode::Read),
            "write" => Some(Mode::Write),
            other => {
                return Err(Error::Protocol(format!(
                    "read-write lock `{}` has mode `{other}`",
                    self.key
                )));
            }
        };
        Ok((mode, state.ttl(), state.fields))
    }

    /// The lock's keys: the hash and the waiting writer's intent (an expiry and a delete cover
    /// both), and the fencing counter (deleted with the lock, never expired); a delete
    /// publishes `1`, waking every waiter. Read holds' lease keys are left to their own expiry:
    /// they name holds that no longer count once the hash is gone.
    fn object_keys(&self) -> ObjectKeys<'_> {
        ObjectKeys::new(
            &self.client,
            KeyShape::ReadWriteLock,
            vec![&self.key, &self.intent_key],
        )
        .with_counters(vec![&self.token_key])
        .waking(&self.channel, "1")
    }

    /// Releases the lock whoever holds it if it is held in `mode` (any mode: `None`), waking
    /// every waiter; whether it did.
    async fn force_unlock_in(&self, mode: Option<Mode>) -> Result<bool> {
        let shared = self;
        let call = ScriptCall::new(&FORCE_RELEASE_HASH, &[&shared.key, &shared.channel])
            .arg(shared.client.config().publish_command().as_str())
            .arg("1")
            .arg(match mode {
                None => "",
                Some(Mode::Read) => "read",
                Some(Mode::Write) => "write",
            });
        let released: i64 = shared.client.eval(&call).await?;
        Ok(released == 1)
    }
}

/// The lock's keys: the hash and the waiting writer's intent, and the fencing counter.
impl ObjectLayout for ReadWriteLock {
    fn object_keys(&self) -> ObjectKeys<'_> {
        self.shared().object_keys()
    }
}

/// One side of a [`ReadWriteLock`]: [`ReadLock`] (`WRITE = false`) or [`WriteLock`]
/// (`WRITE = true`). Both are [`Lock`]s; how each waits:
///
/// - **Read**: the reader gets in at once unless a writer holds the lock or waits for it (then
///   it sleeps until that writer's release wakes every waiter); re-entries never wait.
///   `try_lock` takes a read hold if no writer holds or waits for it (or this owner already
///   reads).
/// - **Write**: the writer announces itself while it waits, so that new readers wait behind
///   it, and sleeps until the last read release (or a write release) wakes it, trying again
///   every second to keep its intent alive; a writer that stops waiting withdraws its intent.
///   A bound owner that reads and asks for the write lock fails at once with
///   [`Error::WouldDeadlock`]. `try_lock` takes it if nobody else holds it, without
///   announcing a wait.
#[derive(Clone, Debug)]
pub struct SideLock<const WRITE: bool> {
    rw: ReadWriteLock,
}

/// The read side of a [`ReadWriteLock`]: shared with other readers, exclusive of writers
/// (other than the reader's own write hold).
pub type ReadLock = SideLock<false>;

/// The write side of a [`ReadWriteLock`]: exclusive of every other owner.
pub type WriteLock = SideLock<true>;

impl<const WRITE: bool> SideLock<WRITE> {
    /// The whole read-write lock.
    pub fn read_write_lock(&self) -> &ReadWriteLock {
        &self.rw
    }

    /// This side, acquired and queried as `owner` (see [`ReadWriteLock::owned_by`]).
    pub fn owned_by(&self, owner: Owner) -> Self {
        SideLock {
            rw: self.rw.owned_by(owner),
        }
    }
}

impl<const WRITE: bool> LockType for SideLock<WRITE> {
    type Kind = Side;

    fn handle(&self) -> &LockHandle<Side> {
        if WRITE { &self.rw.write } else { &self.rw.read }
    }
}

impl LockKind for Side {
    /// Releases the lock whoever holds it, if it is held on this side (read: by readers;
    /// write: by a writer, with any read holds it took), waking every waiter; whether it did
    /// (Redisson's `RReadLock` / `RWriteLock` `forceUnlock`). The whole lock, whatever its
    /// mode: [`ReadWriteLock::force_unlock`].
    fn force_unlock(&self) -> impl std::future::Future<Output = Result<bool>> + Send {
        self.shared.force_unlock_in(Some(self.mode()))
    }

    /// How many holds of this side `owner` has (0: none).
    /// The whole lock's keys ([`ReadWriteLock`]'s), from either side.
    fn object_keys(&self) -> ObjectKeys<'_> {
        self.shared.object_keys()
    }

    fn release_channel(&self) -> Option<&str> {
        Some(&self.shared.channel)
    }

    /// Whether the lock is held on this side: by readers (read side: in read mode, or in write
    /// mode when the writer holds a read too, its hash then having a field besides `mode` and
    /// the writer's) or by a writer (write side), as Redisson's `RReadLock` / `RWriteLock`
    /// `isLocked`, and the lock's TTL, in one read. Whether it is held at all:
    /// [`ReadWriteLock::is_locked`].
    async fn held_for(&self) -> Result<Option<Option<std::time::Duration>>> {
        let (mode, ttl, fields) = self.shared.mode_ttl_fields().await?;
        let held = match (mode, self.write) {
            (Some(Mode::Write), false) => fields > 2,
            (mode, _) => mode == Some(self.mode()),
        };
        Ok(held.then_some(ttl))
    }
}

impl Side {
    /// This side's mode.
    fn mode(&self) -> Mode {
        if self.write { Mode::Write } else { Mode::Read }
    }

    /// The hash field of `owner`'s holds on this side.
    fn field(&self, owner: &Owner) -> String {
        if self.write {
            writer(owner)
        } else {
            owner.as_str().to_owned()
        }
    }

    /// `owner`'s read hold lease prefix: hold `i` lives in `{prefix}:{i}`.
    fn hold_prefix(&self, owner: &Owner) -> String {
        format!("{}:{owner}:rwlock_timeout", self.shared.hold_base)
    }

    /// Withdraws `owner`'s writer intent, if it is still the one set.
    async fn withdraw_intent(&self, owner: &Owner) -> Result<()> {
        let shared = &self.shared;
        let call = ScriptCall::new(&WRITE_LEAVE, &[&shared.intent_key, &shared.channel])
            .arg(writer(owner))
            .arg(shared.client.config().publish_command().as_str());
        let _: i64 = shared.client.eval(&call).await?;
        Ok(())
    }
}

impl HoldKind for Side {
    fn names(&self) -> &LockNames {
        &self.shared.names
    }

    fn kind_name(&self) -> &'static str {
        if self.write {
            "write_lock"
        } else {
            "read_lock"
        }
    }

    fn renew_script(&self) -> &'static Script {
        &RENEW
    }

    fn hold_field(&self, owner: &Owner) -> Arc<str> {
        self.field(owner).into()
    }

    /// On the lock's channel; a waiting writer tries again every second to keep its intent
    /// alive.
    fn waiting(&self, _owner: &Owner) -> Waiting<'_> {
        Waiting {
            channel: Cow::Borrowed(&self.shared.channel),
            policy: lock_message_policy,
            recheck: ferrisson_core::Backoff::fixed(if self.write {
                WRITER_RECHECK
            } else {
                self.shared.client.config().lease()
            }),
            spin: None,
            interest: u64::MAX,
        }
    }

    fn try_call(&self, args: &TryArgs<'_>) -> ScriptCall {
        let shared = &self.shared;
        let retry = if args.retry { "1" } else { "0" };
        let lease = ferrisson_core::__engine::time::millis(args.lease);
        if self.write {
            ScriptCall::new(
                &WRITE_ACQUIRE,
                &[
                    &shared.key,
                    &shared.token_key,
                    &shared.intent_key,
                    shared.undone_key(),
                ],
            )
            .arg(lease)
            .arg(writer(args.owner))
            .arg(args.owner.as_str())
            .arg(args.believed)
            .arg(retry)
            .arg(if shared.fenced { "1" } else { "0" })
            .arg(&shared.hold_base)
            .arg(if args.wait {
                ferrisson_core::__engine::time::millis(WRITER_INTENT)
            } else {
                0
            })
            .arg(args.seq)
        } else {
            let prefix = self.hold_prefix(args.owner);
            ScriptCall::new(
                &READ_ACQUIRE,
                &[
                    &shared.key,
                    &prefix,
                    &shared.intent_key,
                    shared.undone_key(),
                ],
            )
            .arg(lease)
            .arg(args.owner.as_str())
            .arg(writer(args.owner))
            .arg(args.believed)
            .arg(retry)
            .arg(args.seq)
        }
    }

    fn refusal(&self, owner: &Owner, reply: &[i64]) -> Option<Error> {
        matches!(reply, [-1, _]).then(|| {
            Error::WouldDeadlock(format!(
                "{owner} holds read locks of `{}` and asked for its write lock: a read-write lock cannot be upgraded; release the read holds first",
                self.shared.key
            ))
        })
    }

    /// A waiting writer withdraws its intent.
    fn give_up(
        self: Arc<Self>,
        owner: Owner,
        _wait_limit: Option<std::time::Duration>,
    ) -> BoxFuture<'static, Result<()>> {
        Box::pin(async move {
            if self.write {
                self.withdraw_intent(&owner).await?;
            }
            Ok(())
        })
    }

    fn release_call(&self, args: &ReleaseArgs<'_>) -> ScriptCall {
        let shared = &self.shared;
        let publish = shared.client.config().publish_command();
        let record = shared.record_key();
        let call = if self.write {
            ScriptCall::new(&WRITE_RELEASE, &[&shared.key, &shared.channel, record])
                .arg(writer(args.owner))
                .arg(
                    args.renew_lease
                        .map_or(0, ferrisson_core::__engine::time::millis),
                )
                .arg(publish.as_str())
        } else {
            let prefix = self.hold_prefix(args.owner);
            ScriptCall::new(
                &READ_RELEASE,
                &[
                    &shared.key,
                    &shared.channel,
                    &prefix,
                    record,
                    &shared.intent_key,
                ],
            )
            .arg(args.owner.as_str())
            .arg(publish.as_str())
            .arg(&shared.hold_base)
        };
        match args.record {
            Some(recorded) => recorded.args(call, &shared.client, args.retry),
            None => call,
        }
    }

    /// A write hold kept by the watchdog keeps the lease while write holds remain; read holds
    /// keep their own lease keys.
    fn renews_on_release(&self) -> bool {
        self.write
    }
}

/// How a write hold's owner is recorded in the lock's hash (Redisson's layout): `<owner>:write`.
fn writer(owner: &Owner) -> String {
    format!("{}:write", owner.as_str())
}
