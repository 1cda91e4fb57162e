//! The non-reentrant fair lock: the fair lock's queue with re-entry refused.

use std::time::Duration;

use ferrisson_core::__engine::{LockHandle, LockType};
use ferrisson_core::{Client, Owner, Result};
#[cfg(doc)]
use ferrisson_core::{Error, Lock};

use crate::FairLock;
use crate::fair::FairShared;

/// A fair (FIFO) distributed lock that an owner holds at most once: Redisson's
/// `RNonReentrantFairLock` (`getNonReentrantFairLock`), on the [`FairLock`]'s layout, queue and
/// channels.
///
/// Everything but re-entry is the fair lock's: the queue order across clients, dead waiters
/// dropped, leases and the watchdog, the loss signal, fencing, force unlock and inspection. An
/// acquisition by an owner that holds the lock already (a handle [bound](Self::owned_by) to
/// the holder's owner) is [`Error::WouldDeadlock`] naming the lock and the owner, at once: it
/// neither waits for itself nor joins the queue. A Java service on
/// `redisson.getNonReentrantFairLock(name)` and this lock share one queue.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = ferrisson_testkit::RedisServer::spawn();
/// # let client = ferrisson_core::Client::connect(&server.url()).await?;
/// use ferrisson_fair_lock::{Error, Lock, NonReentrantFairLock};
///
/// let owner = client.new_owner();
/// let lock = NonReentrantFairLock::new(&client, "settlement")?.owned_by(owner);
/// let guard = lock.lock().await?;
/// assert!(matches!(lock.try_lock().await, Err(Error::WouldDeadlock(_))));
/// assert_eq!(lock.queue_length().await?, 0);
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct NonReentrantFairLock(FairLock);

impl NonReentrantFairLock {
    /// A handle to the non-reentrant fair lock named `name` (after the client's namespace
    /// prefix).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when `name` is empty.
    pub fn new(client: &Client, name: &str) -> Result<Self> {
        Ok(Self(FairLock::build(client, name, false)?.non_reentrant()))
    }

    /// A handle to the non-reentrant fair lock named `name` that hands out fencing tokens
    /// (`redisson_lock_token:{name}`).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when `name` is empty.
    pub fn fenced(client: &Client, name: &str) -> Result<Self> {
        Ok(Self(FairLock::build(client, name, true)?.non_reentrant()))
    }

    /// This lock with another waiter timeout, as [`FairLock::with_waiter_timeout`].
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] under 100 ms.
    pub fn with_waiter_timeout(&self, timeout: Duration) -> Result<Self> {
        Ok(Self(self.0.with_waiter_timeout(timeout)?))
    }

    /// This lock, acquired and queried as `owner` instead of a fresh owner per acquisition: a
    /// second acquisition while `owner` holds it is refused.
    pub fn owned_by(&self, owner: Owner) -> Self {
        Self(self.0.owned_by(owner))
    }

    /// Whether acquisitions hand out fencing tokens.
    pub fn is_fenced(&self) -> bool {
        self.0.is_fenced()
    }

    /// The waiter timeout.
    pub fn waiter_timeout(&self) -> Duration {
        self.0.waiter_timeout()
    }

    /// How many waiters are queued, as [`FairLock::queue_length`].
    ///
    /// # Errors
    ///
    /// As [`FairLock::queue_length`].
    pub async fn queue_length(&self) -> Result<usize> {
        self.0.queue_length().await
    }
}

/// The fair lock's kind with the script's non-reentrant flag: nothing else of its own.
impl LockType for NonReentrantFairLock {
    type Kind = FairShared;

    fn handle(&self) -> &LockHandle<FairShared> {
        self.0.handle()
    }
}
