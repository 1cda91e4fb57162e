//! Any lock kind behind one object-safe face.

use super::*;

/// Any lock kind, behind one object-safe face, so that a [`MultiLock`] can mix kinds (every
/// [`Lock`] is one: every lock kind's type is a handle of its kind).
pub trait AnyLock: Send + Sync + 'static {
    /// The Redis key of the lock.
    fn key(&self) -> &str;

    /// The client's lease (how long a watchdog-kept hold lasts without renewal).
    fn client_lease(&self) -> Duration;

    /// The client's response timeout.
    fn response_timeout(&self) -> Duration;

    /// The id of the lock's client: with [`key`](Self::key), which lock on which deployment
    /// (RedLocks over the same instances share their waiting, [`RedLock`]).
    fn client_id(&self) -> &str;

    /// The lock's client.
    fn any_client(&self) -> &Client;

    /// [`Lock::acquire`], boxed.
    fn acquire_any(&self, options: AcquireOptions) -> BoxFuture<'_, Result<Option<HoldGuard>>>;

    /// The lock as a hold's guard releases through it: what makes a guard of a hold an
    /// unlock of a RedLock hands over.
    fn hold_lock(&self) -> HoldLock;

    /// [`Lock::wait_unlocked`], boxed, ending at the first look that fails on the connection
    /// (the RedLock's rounds wait the outage out).
    fn wait_unlocked_any(&self) -> BoxFuture<'_, Result<()>>;
}

impl<L: Lock + 'static> AnyLock for L {
    fn key(&self) -> &str {
        Lock::key(self)
    }

    fn client_lease(&self) -> Duration {
        self.client().config().lease()
    }

    fn response_timeout(&self) -> Duration {
        self.client().config().response_timeout()
    }

    fn client_id(&self) -> &str {
        self.client().id()
    }

    fn any_client(&self) -> &Client {
        self.client()
    }

    fn acquire_any(&self, options: AcquireOptions) -> BoxFuture<'_, Result<Option<HoldGuard>>> {
        Box::pin(self.acquire(options))
    }

    fn wait_unlocked_any(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(self.watch_unlocked())
    }

    fn hold_lock(&self) -> HoldLock {
        ferrisson_core::__engine::LockWatch::hold_lock(self)
    }
}
