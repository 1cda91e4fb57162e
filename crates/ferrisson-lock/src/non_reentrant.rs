//! The non-reentrant lock: the reentrant lock's layout with re-entry refused.

use crate::scripts::NON_REENTRANT_ACQUIRE;
use ferrisson_core::__engine::{HashLock, LockHandle, LockType};
use ferrisson_core::{Client, Owner, Result};
#[cfg(doc)]
use ferrisson_core::{Error, Lock};

/// A distributed lock that an owner holds at most once: Redisson's `RNonReentrantLock`
/// (`getNonReentrantLock`), on the same `RLock` hash layout and channel as
/// [`ReentrantLock`](crate::ReentrantLock).
///
/// Everything but re-entry is the reentrant lock's: leases and the watchdog, the loss signal,
/// fencing ([`fenced`](Self::fenced)), turns between clients, hand-off to local waiters, force
/// unlock and inspection (which shows it as a `lock`: the layout is one). An acquisition by an
/// owner that holds the lock already (a handle [bound](Self::owned_by) to the holder's owner) is
/// [`Error::WouldDeadlock`] naming the lock and the owner, at once: never a wait for itself, and
/// nothing taken. A Java service on `redisson.getNonReentrantLock(name)` and this lock exclude
/// and wake each other; Redisson throws `IllegalMonitorStateException` where this returns the
/// error.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = ferrisson_testkit::RedisServer::spawn();
/// # let client = ferrisson_core::Client::connect(&server.url()).await?;
/// use ferrisson_lock::{Error, Lock, NonReentrantLock};
///
/// let owner = client.new_owner();
/// let lock = NonReentrantLock::new(&client, "payouts")?.owned_by(owner);
/// let guard = lock.lock().await?;
/// assert!(matches!(lock.try_lock().await, Err(Error::WouldDeadlock(_))));
/// assert_eq!(lock.hold_count().await?, 1);
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
///
/// # Keys
///
/// As [`ReentrantLock`](crate::ReentrantLock)'s: the hash (each holder's count is 1) and, when
/// fenced, the fencing counter.
#[derive(Clone, Debug)]
pub struct NonReentrantLock(LockHandle<HashLock>);

impl NonReentrantLock {
    /// A handle to the non-reentrant lock named `name` (after the client's namespace prefix).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when `name` is empty.
    pub fn new(client: &Client, name: &str) -> Result<Self> {
        Self::build(client, name, false)
    }

    /// A handle to the non-reentrant lock named `name` that hands out fencing tokens
    /// (`redisson_lock_token:{name}`, shared with the reentrant lock of that name).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when `name` is empty.
    pub fn fenced(client: &Client, name: &str) -> Result<Self> {
        Self::build(client, name, true)
    }

    fn build(client: &Client, name: &str, fenced: bool) -> Result<Self> {
        let kind = HashLock::new(client, name, fenced)?.with_acquire(&NON_REENTRANT_ACQUIRE);
        Ok(Self(LockHandle::new(kind)))
    }

    /// This lock, acquired and queried as `owner` instead of a fresh owner per acquisition: a
    /// second acquisition while `owner` holds it is refused.
    pub fn owned_by(&self, owner: Owner) -> Self {
        Self(self.0.owned_by(owner))
    }

    /// Whether acquisitions hand out fencing tokens.
    pub fn is_fenced(&self) -> bool {
        self.0.kind().fenced
    }
}

/// The core's [`HashLock`] with this crate's acquire script: nothing else of its own.
impl LockType for NonReentrantLock {
    type Kind = HashLock;

    fn handle(&self) -> &LockHandle<HashLock> {
        &self.0
    }
}
