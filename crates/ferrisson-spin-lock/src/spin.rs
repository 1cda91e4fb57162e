//! The spin lock.

use std::borrow::Cow;

use ferrisson_core::__engine::ObjectKeys;
use ferrisson_core::__engine::{
    HashLock, HoldKind, LOCK_PRELUDE, LockHandle, LockKind, LockNames, LockType, RECORD_PRELUDE,
    RENEW_HASH, ReleaseArgs, Script, ScriptCall, TryArgs, Waiting, lock_message_policy,
};
use ferrisson_core::{Backoff, Client, Error, Owner, Result};
#[cfg(doc)]
use ferrisson_core::{HoldGuard, Lock};

/// The spin lock's acquire (`lua/spin_lock/acquire.lua`): the reentrant lock's, and the
/// next-in-line reservation that makes it fair across clients.
pub static ACQUIRE: Script = Script::with_two_preludes(
    "spin_lock/acquire",
    &LOCK_PRELUDE,
    &RECORD_PRELUDE,
    include_str!("../lua/acquire.lua"),
);

/// The shortest a reservation lasts after its waiter's last try, whatever the backoff: above
/// any round trip, short enough that a waiter gone for good holds a free lock up only briefly.
const MIN_RESERVATION: std::time::Duration = std::time::Duration::from_millis(100);

/// How long a reservation stands before it binds, in the backoff's minimum pauses: until then
/// the lock goes to whoever comes (a busy lock keeps its pace), after that to the waiter that
/// has waited longest.
const PATIENCE_PAUSES: u32 = 4;

/// A reentrant distributed lock whose waiters poll instead of listening: Redisson's
/// `RSpinLock`, on the same Redis layout (a hash `name` of owner → hold count, with a TTL).
///
/// - **The reentrant lock's semantics.** Exclusive per acquisition, reentrant through an
///   [`Owner`] ([`owned_by`](Self::owned_by)), holds kept by the client's watchdog unless taken
///   with a fixed lease, a loss signal on the guard ([`lost`](HoldGuard::lost)) before the
///   lease can have run out on the server, and fencing tokens with [`fenced`](Self::fenced).
/// - **No pub/sub.** A release publishes nothing; a waiter tries again after a pause that
///   starts at the backoff's minimum and doubles up to its maximum (1 ms to 128 ms by default,
///   [`with_backoff`](Self::with_backoff)), never sleeping past the holder's lease or its own
///   deadline. A waiter costs Redis one script call per pause; a release is noticed within one
///   pause. Local waiters are not handed the lock: every acquisition is a try.
/// - **Fair across clients** (our extension): a waiting try that fails reserves the lock for
///   its caller when no one who has waited longer holds the reservation
///   (`suffixed(name, "next")`, ending by itself 100 ms, or four of the backoff's minimum
///   pauses, after its waiter's last try). Once the reservation has stood for four of the
///   backoff's minimum pauses, a free lock goes to its waiter only, who tries again at its
///   shortest pause and later at a quarter of the time since, so a release is taken within a
///   fraction of the hold it ends. Without it, the releasing client took the lock straight
///   back while the others slept through their backoff (one process of four got 0.05 of its
///   share). Redisson's `RSpinLock` ignores the reservation (a mixed fleet is as fair as
///   Redisson's own).
/// - **Interop.** Redisson's `RSpinLock` on the same name excludes and is excluded by it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = ferrisson_testkit::RedisServer::spawn();
/// # let client = ferrisson_core::Client::connect(&server.url()).await?;
/// use std::time::Duration;
/// use ferrisson_spin_lock::{Backoff, Lock, AcquireOptions, SpinLock};
///
/// let lock = SpinLock::new(&client, "reindex")?.with_backoff(Backoff {
///     min: Duration::from_millis(2),
///     max: Duration::from_millis(50),
/// })?;
/// let guard = lock.lock().await?;
/// let other = lock.clone();
/// let waiter = tokio::spawn(async move {
///     other.try_lock_with(AcquireOptions::new().with_wait(Duration::from_secs(5))).await
/// });
/// guard.unlock().await?;
/// let second = waiter.await??.expect("the waiter polled its way in");
/// second.unlock().await?;
/// # Ok(()) }
/// ```
///
/// # Cancel safety
///
/// As the reentrant lock's: a dropped `lock` future gives back a hold its last try may have
/// taken (the release follows on the same connection); a waiter holds nothing between tries,
/// so dropping it leaves nothing behind.
///
/// # Keys
///
/// The reentrant lock's (the hash and the fencing counter); a delete publishes nothing, as no
/// spin-lock waiter listens (they poll). The reservation, `suffixed(name, "next")`, always
/// carries its own short TTL and is left to it.
#[derive(Clone, Debug)]
pub struct SpinLock(LockHandle<SpinShared>);

/// The waiters' backoff unless [`SpinLock::with_backoff`] sets another: Redisson's `RSpinLock`
/// default, 1 ms doubling up to 128 ms (never past the holder's lease or the waiter's deadline).
pub const DEFAULT_BACKOFF: Backoff = Backoff {
    min: std::time::Duration::from_millis(1),
    max: std::time::Duration::from_millis(128),
};

/// The lock's keys and calls ([`HashLock`], the reentrant lock's), and its waiters' backoff.
pub struct SpinShared {
    lock: HashLock,
    backoff: Backoff,
}

impl std::ops::Deref for SpinShared {
    type Target = HashLock;
    fn deref(&self) -> &HashLock {
        &self.lock
    }
}

impl SpinLock {
    /// A handle to the spin lock named `name` (after the client's namespace prefix), with the
    /// default backoff (1 ms, doubling, up to 128 ms).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when `name` is empty.
    pub fn new(client: &Client, name: &str) -> Result<Self> {
        Self::build(client, name, false)
    }

    /// As [`new`](Self::new), handing out a fencing token with every acquisition (the
    /// reentrant lock's counter `redisson_lock_token:{name}`).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when `name` is empty.
    pub fn fenced(client: &Client, name: &str) -> Result<Self> {
        Self::build(client, name, true)
    }

    fn build(client: &Client, name: &str, fenced: bool) -> Result<Self> {
        Ok(Self(LockHandle::new(SpinShared {
            lock: HashLock::new(client, name, fenced)?,
            backoff: DEFAULT_BACKOFF,
        })))
    }

    /// This lock with waiters pausing as `backoff` says.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when `min` is zero or above `max`, or `max` is above an
    /// hour.
    pub fn with_backoff(&self, backoff: Backoff) -> Result<Self> {
        if backoff.min.is_zero()
            || backoff.min > backoff.max
            || backoff.max > std::time::Duration::from_secs(3600)
        {
            return Err(Error::InvalidArgument(format!(
                "a spin lock's backoff needs 0 < min <= max <= 1 h, got {backoff:?}"
            )));
        }
        Ok(Self(self.0.with_kind(SpinShared {
            lock: self.0.kind().lock.clone(),
            backoff,
        })))
    }

    /// This lock, acquired and queried as `owner` (re-entry, or a hold one task takes and
    /// another releases), as [`ReentrantLock::owned_by`](https://docs.rs/ferrisson-lock).
    pub fn owned_by(&self, owner: Owner) -> Self {
        Self(self.0.owned_by(owner))
    }

    /// The waiters' backoff.
    pub fn backoff(&self) -> Backoff {
        self.0.kind().backoff
    }

    /// Whether acquisitions hand out fencing tokens.
    pub fn is_fenced(&self) -> bool {
        self.0.kind().fenced
    }
}

impl LockType for SpinLock {
    type Kind = SpinShared;

    fn handle(&self) -> &LockHandle<SpinShared> {
        &self.0
    }
}

impl LockKind for SpinShared {
    fn force_unlock(&self) -> impl std::future::Future<Output = Result<bool>> + Send {
        self.lock.force_unlock()
    }

    fn object_keys(&self) -> ObjectKeys<'_> {
        self.lock.object_keys(false)
    }
}

impl HoldKind for SpinShared {
    fn names(&self) -> &LockNames {
        &self.lock.names
    }

    fn kind_name(&self) -> &'static str {
        "spin_lock"
    }

    fn renew_script(&self) -> &'static Script {
        &RENEW_HASH
    }

    fn waiting(&self, _owner: &Owner) -> Waiting<'_> {
        Waiting {
            channel: Cow::Borrowed(self.channel()),
            policy: lock_message_policy,
            recheck: Backoff::fixed(self.backoff.max),
            spin: Some(self.backoff),
            interest: u64::MAX,
        }
    }

    fn try_call(&self, args: &TryArgs<'_>) -> ScriptCall {
        use ferrisson_core::__engine::time::millis;
        let lock = &self.lock;
        let keys: &[&str] = if lock.fenced {
            &[&lock.key, lock.undone_key(), lock.token_key()]
        } else {
            &[&lock.key, lock.undone_key()]
        };
        let reservation = MIN_RESERVATION.max(self.backoff.min.saturating_mul(4));
        // Any wait at all counts (0 means a first try, which never takes the reservation).
        let waited = if args.waited.is_zero() {
            0
        } else {
            millis(args.waited).max(1)
        };
        let call = ScriptCall::new(&ACQUIRE, keys)
            .arg(millis(args.lease))
            .arg(args.owner.as_str())
            .arg(waited)
            .arg(millis(reservation))
            .arg(millis(self.backoff.min.saturating_mul(PATIENCE_PAUSES)))
            .arg(args.seq);
        if args.retry {
            call.arg(args.believed)
        } else {
            call
        }
    }

    fn release_call(&self, args: &ReleaseArgs<'_>) -> ScriptCall {
        // Nothing published (nobody listens), and never a successor (no local hand-offs).
        self.lock.release_call(args, false)
    }
}
