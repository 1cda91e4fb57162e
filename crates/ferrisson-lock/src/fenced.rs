//! Fenced locks, whose every acquisition carries a token: Redisson's `RFencedLock`
//! ([`FencedLock`]) and the fenced lean mutex ([`FencedMutex`]), one generic [`Fenced`].

use ferrisson_core::{AcquireOptions, Client, Error, Hold, HoldGuard, Lock, Owner, Result};

use crate::{Mutex, ReentrantLock};

/// A reentrant lock whose every acquisition carries a fencing token, with Redisson's
/// `RFencedLock` layout: the counter `redisson_lock_token:{name}`, which never expires, is set
/// with every acquisition (re-entries included) to the larger of itself + 1 and the server's
/// clock in microseconds ([docs/guarantees.md](https://github.com/ferrisson/ferrisson/blob/main/docs/guarantees.md) §9), so that tokens keep growing even after Redis
/// lost the counter.
///
/// **Token values.** Tokens are large (about 1.7 × 10^15 today) and not consecutive: Redisson's
/// `RFencedLock` `INCR`s the same counter and gives 1, 2, 3 … on a fresh one. Both sides only
/// ever compare tokens, never count them, so a mixed fleet reads them alike: whichever side
/// takes the lock, its token is above every token issued before on that counter. After the
/// counter is lost (deleted, a restart without persistence) Redisson's next token starts at 1
/// again, below the tokens of before; ferrisson's starts at the clock, above them.
///
/// Its guard's [`token`](FencedGuard::token) is a plain `u64`, strictly greater than the token
/// of every earlier acquisition of the lock by any owner. Send it with every write to the
/// protected resource, and have the resource reject a write whose token is not above the
/// highest it has accepted: a holder that lost the lock without knowing it (a long pause, a
/// failover) is then turned away instead of overwriting its successor's work.
///
/// Everything else is the [`ReentrantLock`]'s. It is a [`Lock`] too, so generic code takes it.
/// Its own `lock`, `lock_with`, `try_lock` and `try_lock_with` give a [`FencedGuard`] and its
/// own [`with`](Self::with) a [`FencedHold`], whose tokens are plain `u64`s; the trait's,
/// called through a generic `L: Lock`, give a [`HoldGuard`] and a [`Hold`] with the token as
/// `Some`.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = ferrisson_testkit::RedisServer::spawn();
/// # let client = ferrisson_core::Client::connect(&server.url()).await?;
/// use ferrisson_lock::FencedLock;
///
/// let lock = FencedLock::new(&client, "ledger")?;
/// let first = lock.lock().await?;
/// let token: u64 = first.token();
/// first.unlock().await?;
/// let second = lock.lock().await?;
/// assert!(second.token() > token);
/// second.unlock().await?;
/// # Ok(()) }
/// ```
///
/// Scoped, the work gets the token with its [`Hold`](ferrisson_core::Hold), and stamps each
/// write with `(token, sequence)`: the resource keeps the largest pair it accepted and refuses
/// a smaller one, so a stale holder is refused and this holder's second write is not.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = ferrisson_testkit::RedisServer::spawn();
/// # let client = ferrisson_core::Client::connect(&server.url()).await?;
/// use ferrisson_lock::FencedLock;
///
/// // The resource: the largest (token, sequence) it accepted.
/// let accepted = std::sync::Mutex::new((0u64, 0u64));
/// let write = |stamp: (u64, u64)| {
///     let mut last = accepted.lock().unwrap();
///     let ok = stamp > *last;
///     if ok {
///         *last = stamp;
///     }
///     ok
/// };
/// let lock = FencedLock::new(&client, "ledger")?;
/// let written = lock
///     .with(|hold| async move {
///         hold.ensure_held()?;
///         let (first, second) = (hold.stamp(), hold.stamp()); // (token, 1), (token, 2)
///         Ok::<_, ferrisson_core::Error>((first, second))
///     })
///     .await??;
/// assert!(write(written.0) && write(written.1), "both writes of the holder go in");
/// assert!(!write((written.0.0 - 1, 9)), "an older token is refused");
/// # Ok(()) }
/// ```
pub type FencedLock = Fenced<ReentrantLock>;

/// The lean [`Mutex`] (**\[ext\]**, the standard Redlock layout), fenced
/// ([`Mutex::fenced`]: tokens from `ferrisson_mutex_token:{name}`), whose guards' and holds'
/// tokens are plain `u64`s, as a [`FencedLock`]'s are. It is a [`Lock`] too.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = ferrisson_testkit::RedisServer::spawn();
/// # let client = ferrisson_core::Client::connect(&server.url()).await?;
/// use ferrisson_lock::FencedMutex;
///
/// let mutex = FencedMutex::new(&client, "ledger")?;
/// let first: u64 = mutex.with(|hold| async move { hold.token() }).await?;
/// let second = mutex.lock().await?;
/// assert!(second.token() > first);
/// second.unlock().await?;
/// # Ok(()) }
/// ```
pub type FencedMutex = Fenced<Mutex>;

/// A lock whose every acquisition carries a fencing token, as a plain `u64`: [`FencedLock`]
/// (a reentrant lock, Redisson's `RFencedLock`) or [`FencedMutex`] (the lean mutex). Its own
/// `lock`, `lock_with`, `try_lock`, `try_lock_with` and `with` give a [`FencedGuard`] or a
/// [`FencedHold`]; through the [`Lock`] trait it is the lock underneath.
#[derive(Clone, Debug)]
pub struct Fenced<L> {
    lock: L,
}

/// One hold of a fenced lock ([`Fenced`]): a [`HoldGuard`] (which it dereferences to, for the loss
/// signal and the rest) whose token is always there. Dropped, it releases in the background,
/// as a [`HoldGuard`] does: a process about to end calls
/// [`Client::shutdown`](ferrisson_core::Client::shutdown) after dropping it.
#[must_use = "dropping the guard releases the lock at once (in the background)"]
#[derive(Debug)]
pub struct FencedGuard {
    guard: HoldGuard,
    token: u64,
}

impl FencedGuard {
    /// The fencing token of this acquisition.
    pub fn token(&self) -> u64 {
        self.token
    }

    /// Releases this hold; see [`HoldGuard::unlock`].
    ///
    /// # Cancel safety
    ///
    /// As [`HoldGuard::unlock`].
    ///
    /// # Errors
    ///
    /// As [`HoldGuard::unlock`].
    pub async fn unlock(self) -> Result<()> {
        self.guard.unlock().await
    }

    /// The plain guard.
    pub fn into_inner(self) -> HoldGuard {
        self.guard
    }
}

impl std::ops::Deref for FencedGuard {
    type Target = HoldGuard;

    fn deref(&self) -> &HoldGuard {
        &self.guard
    }
}

/// What scoped work on a fenced lock gets ([`Fenced::with`]): its [`Hold`] (which it
/// dereferences to, for `ensure_held`, `is_lost` and the loss signal `lost`), whose token is
/// always there.
#[derive(Clone, Debug)]
pub struct FencedHold {
    hold: Hold,
    token: u64,
}

impl FencedHold {
    /// The fencing token of the acquisition.
    pub fn token(&self) -> u64 {
        self.token
    }

    /// The token and the next number of a sequence that starts at 1, shared by the hold's
    /// clones: the `(token, sequence)` pair to stamp each of several writes with (see
    /// [`Hold::stamp`]).
    pub fn stamp(&self) -> (u64, u64) {
        self.hold.stamp().unwrap_or((self.token, 0))
    }
}

impl std::ops::Deref for FencedHold {
    type Target = Hold;

    fn deref(&self) -> &Hold {
        &self.hold
    }
}

/// A guard of a fenced acquisition, which always carries a token.
fn fenced(guard: HoldGuard) -> Result<FencedGuard> {
    match guard.token() {
        Some(token) => Ok(FencedGuard { guard, token }),
        None => Err(Error::Protocol(format!(
            "fenced lock `{}` was acquired without a token",
            guard.key()
        ))),
    }
}

impl Fenced<ReentrantLock> {
    /// A handle to the fenced lock named `name` (after the client's namespace prefix).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when `name` is empty.
    pub fn new(client: &Client, name: &str) -> Result<Self> {
        Ok(Self {
            lock: ReentrantLock::fenced(client, name)?,
        })
    }

    /// This lock, acquired as `owner` (re-entry; see [`ReentrantLock::owned_by`]).
    pub fn owned_by(&self, owner: Owner) -> Self {
        Self {
            lock: self.lock.owned_by(owner),
        }
    }
}

impl Fenced<Mutex> {
    /// A handle to the fenced mutex named `name` (after the client's namespace prefix).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when `name` is empty.
    pub fn new(client: &Client, name: &str) -> Result<Self> {
        Ok(Self {
            lock: Mutex::fenced(client, name)?,
        })
    }

    /// This mutex, acquired as `owner` (see [`Mutex::owned_by`]).
    pub fn owned_by(&self, owner: Owner) -> Self {
        Self {
            lock: self.lock.owned_by(owner),
        }
    }
}

impl<L: Lock> Fenced<L> {
    /// The fenced lock underneath. A fenced lock is a [`Lock`] itself, so its queries
    /// (`is_locked`, `force_unlock`, …) need no detour through this.
    pub fn as_lock(&self) -> &L {
        &self.lock
    }

    /// Takes the lock, waiting as long as it takes; see [`Lock::lock`].
    ///
    /// # Cancel safety
    ///
    /// As [`Lock::acquire`].
    ///
    /// # Errors
    ///
    /// As [`Lock::lock`].
    pub async fn lock(&self) -> Result<FencedGuard> {
        fenced(self.lock.lock().await?)
    }

    /// Takes the lock with options; see [`Lock::lock_with`].
    ///
    /// # Cancel safety
    ///
    /// As [`Lock::acquire`].
    ///
    /// # Errors
    ///
    /// As [`Lock::lock_with`].
    pub async fn lock_with(&self, options: AcquireOptions) -> Result<FencedGuard> {
        fenced(self.lock.lock_with(options).await?)
    }

    /// Takes the lock, runs `work` while it is held and releases it, as [`Lock::with`] does:
    /// the work gets a [`FencedHold`], whose token is a plain `u64`.
    ///
    /// # Cancel safety
    ///
    /// As [`Lock::with`].
    ///
    /// # Errors
    ///
    /// As [`Lock::with`].
    pub async fn with<F, Fut>(&self, work: F) -> Result<Fut::Output>
    where
        F: FnOnce(FencedHold) -> Fut,
        Fut: std::future::Future,
    {
        self.with_options(AcquireOptions::new(), work).await
    }

    /// As [`with`](Self::with), the lock taken with options; see [`Lock::with_options`].
    ///
    /// # Cancel safety
    ///
    /// As [`Lock::with`].
    ///
    /// # Errors
    ///
    /// As [`Lock::with_options`].
    pub async fn with_options<F, Fut>(
        &self,
        options: AcquireOptions,
        work: F,
    ) -> Result<Fut::Output>
    where
        F: FnOnce(FencedHold) -> Fut,
        Fut: std::future::Future,
    {
        let guard = self.lock_with(options).await?;
        let hold = FencedHold {
            hold: guard.hold(),
            token: guard.token(),
        };
        guard.into_inner().run(work(hold)).await
    }

    /// Takes the lock if that is possible right now; see [`Lock::try_lock`].
    ///
    /// # Cancel safety
    ///
    /// As [`Lock::acquire`].
    ///
    /// # Errors
    ///
    /// As [`Lock::try_lock`].
    pub async fn try_lock(&self) -> Result<Option<FencedGuard>> {
        self.lock.try_lock().await?.map(fenced).transpose()
    }

    /// Takes the lock, waiting up to the options' wait limit; see [`Lock::try_lock_with`].
    ///
    /// # Cancel safety
    ///
    /// As [`Lock::acquire`].
    ///
    /// # Errors
    ///
    /// As [`Lock::try_lock_with`].
    pub async fn try_lock_with(&self, options: AcquireOptions) -> Result<Option<FencedGuard>> {
        self.lock
            .try_lock_with(options)
            .await?
            .map(fenced)
            .transpose()
    }
}

/// The kind and handle are the fenced lock's underneath, through which it is a [`Lock`] and a
/// [`SyncObject`](ferrisson_core::SyncObject): deleting a fenced lock deletes its fencing
/// counter too, and tokens still grow after that (their floor is the server's clock).
impl<L: ferrisson_core::__engine::LockType> ferrisson_core::__engine::LockType for Fenced<L> {
    type Kind = L::Kind;

    fn handle(&self) -> &ferrisson_core::__engine::LockHandle<Self::Kind> {
        self.lock.handle()
    }
}
