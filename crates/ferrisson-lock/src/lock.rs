//! The reentrant lock.

use ferrisson_core::__engine::{HashLock, LockHandle, LockType};
use ferrisson_core::{Client, Owner, Result};
#[cfg(doc)]
use ferrisson_core::{HoldGuard, Lock};

/// A reentrant distributed lock with Redisson's `RLock` semantics and Redis layout.
///
/// - **Exclusive per acquisition, reentrant per owner.** A handle with no owner of its own
///   takes every hold under a fresh owner, so two acquisitions never share a hold: futures
///   joined in one task exclude each other as two processes do, as with
///   `tokio::sync::Mutex`. Re-entry is explicit: a handle bound to an [`Owner`] with
///   [`owned_by`](Self::owned_by) (a guard's [`owner`](crate::HoldGuard::owner), or
///   [`Client::new_owner`]) re-enters when that owner already holds the lock, from any task,
///   and each hold is released on its own.
/// - **Leases.** A hold taken without a fixed lease is kept alive by the client's watchdog,
///   which renews it every third of the lease (30 s by default). If the process dies, the lock
///   ends by itself at most one lease after the last renewal. A hold taken with a fixed lease
///   ends when the lease runs out, released or not.
/// - **Loss is never silent.** When a hold cannot be kept (Redis lost the key in a restart or
///   failover, renewals failed, the process stalled past the lease), the guard's
///   [`lost`](crate::HoldGuard::lost) signal fires before the lease can have run out on the server.
/// - **Fencing.** A lock made with [`fenced`](Self::fenced) hands out a strictly increasing
///   token with every acquisition ([`HoldGuard::token`]) so that the protected resource can
///   reject writes of a holder that lost the lock without knowing it.
/// - **Turns, not FIFO.** Like `RLock` it is not fair, but neither is it a race the nearest
///   client always wins: one client's waiters are served in arrival order, and clients
///   contending for the lock take turns (a client hands the lock on locally up to 8 times,
///   then lets each other waiting client take it once). [`docs/guarantees.md`](https://github.com/ferrisson/ferrisson/blob/main/docs/guarantees.md), "Fairness", says
///   what that promises; the fair lock (`ferrisson-fair-lock`) gives strict FIFO.
/// - **Interop.** The key layout and messages are Redisson's: a Java service using
///   `redisson.getLock(name)` and this lock on the same name exclude and wake each other.
/// - **Coming from Redisson** ([`docs/redisson.md`](https://github.com/ferrisson/ferrisson/blob/main/docs/redisson.md) has the whole table): the guard carries its
///   owner, so only the holder can unlock, and from any task (Redisson ties a hold to a
///   thread: `unlock` from another thread fails); an unlock after the lease ran out is
///   [`Error::LeaseLost`](ferrisson_core::Error::LeaseLost), never a silent success;
///   `isHeldByThread(id)` is [`is_held_by`](Lock::is_held_by) an [`Owner`];
///   `delete`/`expire`/`clearExpire`/`remainTimeToLive`/`isExists` are the
///   [`SyncObject`](ferrisson_core::SyncObject) trait's.
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
/// use ferrisson_lock::{Lock, AcquireOptions, ReentrantLock, SyncObject};
///
/// let lock = ReentrantLock::new(&client, "reports")?;
/// let options = AcquireOptions::new()
///     .with_wait(Duration::from_millis(500))
///     .with_lease(Duration::from_secs(10));
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
///
/// # Waiting
///
/// Waiting costs Redis nothing while the lock does not change hands (the waiter sleeps on the
/// client's one subscriber connection until a release message, or the holder's lease ending,
/// wakes it). Local waiters queue in arrival order: a releasing holder of the same client
/// hands the lock to the first of them in its release call (at most 8 times in a row, then it
/// frees the lock for everyone), and a new caller queues behind them instead of barging in. A
/// dropped waiter hands any wake-up it received to the next local waiter, and a lock handed to
/// a waiter that has left is released at once.
///
/// # Keys
///
/// The hash and the fencing counter (deleted with the lock, never expired); a delete publishes
/// `0`, waking a waiter.
#[derive(Clone, Debug)]
pub struct ReentrantLock(LockHandle<HashLock>);

impl ReentrantLock {
    /// A handle to the lock named `name` (after the client's namespace prefix).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](ferrisson_core::Error::InvalidArgument) when `name` is empty.
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
    /// [`Error::InvalidArgument`](ferrisson_core::Error::InvalidArgument) when `name` is empty.
    pub fn fenced(client: &Client, name: &str) -> Result<Self> {
        Self::build(client, name, true)
    }

    fn build(client: &Client, name: &str, fenced: bool) -> Result<Self> {
        Ok(Self(LockHandle::new(HashLock::new(client, name, fenced)?)))
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
        Self(self.0.owned_by(owner))
    }

    /// Whether acquisitions hand out fencing tokens.
    pub fn is_fenced(&self) -> bool {
        self.0.kind().fenced
    }
}

/// The lock's kind is the core's [`HashLock`] (Redisson's `RLock` layout, whose scripts are the
/// core's): an acquisition never comes back into this crate.
impl LockType for ReentrantLock {
    type Kind = HashLock;

    fn handle(&self) -> &LockHandle<HashLock> {
        &self.0
    }
}
