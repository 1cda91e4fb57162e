//! The lock kinds, blocking: any lock ([`BlockingLock`]), its guard ([`LockGuard`]), the
//! read-write lock's two sides, and the fair and spin locks' own calls.

use super::*;

/// A lock of any kind, blocking: the reentrant, fenced and fair locks and either side of a
/// read-write lock. Taking it returns a [`LockGuard`].
#[derive(Debug, Clone)]
pub struct BlockingLock<L> {
    pub(super) client: Client,
    pub(super) inner: L,
}

impl<L: crate::Lock> BlockingLock<L> {
    /// Takes the lock, waiting as long as it takes.
    ///
    /// # Errors
    ///
    /// As the async lock's `lock`.
    pub fn lock(&self) -> Result<LockGuard> {
        self.lock_with(AcquireOptions::new())
    }

    /// Takes the lock with options; running out of wait time is [`Error::Timeout`].
    ///
    /// # Errors
    ///
    /// As the async lock's `lock_with`.
    pub fn lock_with(&self, options: AcquireOptions) -> Result<LockGuard> {
        match self.try_lock_with(options)? {
            Some(guard) => Ok(guard),
            None => Err(Error::Timeout(options.wait().unwrap_or_default())),
        }
    }

    /// One try, no waiting: `None` when another owner holds it.
    ///
    /// # Errors
    ///
    /// As the async lock's `try_lock`.
    pub fn try_lock(&self) -> Result<Option<LockGuard>> {
        self.try_lock_with(AcquireOptions::new().with_wait(Duration::ZERO))
    }

    /// Takes the lock within the options' wait limit: `None` when it passed.
    ///
    /// # Errors
    ///
    /// As the async lock's `try_lock_with`.
    pub fn try_lock_with(&self, options: AcquireOptions) -> Result<Option<LockGuard>> {
        let guard = self.client.run(self.inner.acquire(options))?;
        Ok(guard.map(|g| self.client.guard(g)))
    }

    /// Whether any owner holds the lock.
    ///
    /// # Errors
    ///
    /// [`Error::Redis`].
    pub fn is_locked(&self) -> Result<bool> {
        self.client.run(self.inner.is_locked())
    }

    /// Frees the lock whoever holds it; `true` when it was held.
    ///
    /// # Errors
    ///
    /// [`Error::Redis`].
    pub fn force_unlock(&self) -> Result<bool> {
        self.client.run(self.inner.force_unlock())
    }

    /// How many holds `owner` has (Redisson's `getHoldCount` for another thread's id).
    ///
    /// # Errors
    ///
    /// As the async lock's [`hold_count_of`](crate::Lock::hold_count_of).
    pub fn hold_count_of(&self, owner: &crate::Owner) -> Result<u32> {
        self.client.run(self.inner.hold_count_of(owner))
    }

    /// Whether `owner` holds the lock (Redisson's `isHeldByThread(id)`; a guard's owner is
    /// [`LockGuard::as_async`]`().owner()`).
    ///
    /// # Errors
    ///
    /// As the async lock's [`is_held_by`](crate::Lock::is_held_by).
    pub fn is_held_by(&self, owner: &crate::Owner) -> Result<bool> {
        self.client.run(self.inner.is_held_by(owner))
    }

    /// Waits until nobody holds the lock, without taking it.
    ///
    /// # Errors
    ///
    /// As the async lock's [`wait_unlocked`](crate::Lock::wait_unlocked).
    pub fn wait_unlocked(&self) -> Result<()> {
        self.client.run(self.inner.wait_unlocked())
    }

    /// How many holds the handle's bound owner has (0: none).
    ///
    /// # Errors
    ///
    /// As the async lock's [`hold_count`](crate::Lock::hold_count).
    pub fn hold_count(&self) -> Result<u32> {
        self.client.run(self.inner.hold_count())
    }

    /// Whether the handle's bound owner holds the lock.
    ///
    /// # Errors
    ///
    /// As the async lock's [`is_held_by_current`](crate::Lock::is_held_by_current).
    pub fn is_held_by_current(&self) -> Result<bool> {
        self.client.run(self.inner.is_held_by_current())
    }

    /// Takes the lock, runs `work` and releases, as the async [`with`](crate::Lock::with)
    /// does: `work`'s output, or [`Error::LeaseLost`] when the hold was lost while it ran. A
    /// blocking closure cannot be cut off at the loss as async work is: check
    /// [`LockGuard::ensure_held`] before each step that must run under the lock. An unlock
    /// that fails after the work is logged, and the hold ends with its lease.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock), and [`Error::LeaseLost`].
    pub fn with<T>(&self, work: impl FnOnce(&LockGuard) -> T) -> Result<T> {
        run_held(self.lock()?, work, || {
            crate::Lock::key(&self.inner).to_owned()
        })
    }

    /// The async lock underneath.
    pub fn as_async(&self) -> &L {
        &self.inner
    }
}

impl<L: crate::Lock> BlockingObject for BlockingLock<L> {
    type Async = L;

    fn parts(&self) -> (&Client, &L) {
        (&self.client, &self.inner)
    }
}

/// Redisson's `RObject`/`RExpirable` calls, blocking, on every blocking synchronizer: the async
/// [`SyncObject`](crate::SyncObject)'s, each run on the client's runtime.
pub trait BlockingObject {
    /// The async synchronizer underneath.
    type Async: crate::SyncObject;

    /// The blocking client and the async synchronizer.
    fn parts(&self) -> (&Client, &Self::Async);

    /// Whether the synchronizer's main key exists.
    ///
    /// # Errors
    ///
    /// As [`SyncObject::exists`](crate::SyncObject::exists).
    fn exists(&self) -> Result<bool> {
        let (client, inner) = self.parts();
        client.run(crate::SyncObject::exists(inner))
    }

    /// Sets every state key to expire in `ttl`; `true` when the synchronizer existed.
    ///
    /// # Errors
    ///
    /// As [`SyncObject::expire`](crate::SyncObject::expire).
    fn expire(&self, ttl: Duration) -> Result<bool> {
        let (client, inner) = self.parts();
        client.run(crate::SyncObject::expire(inner, ttl))
    }

    /// Removes the expiry of every state key; `true` when one of them had an expiry.
    ///
    /// # Errors
    ///
    /// As [`SyncObject::clear_expire`](crate::SyncObject::clear_expire).
    fn clear_expire(&self) -> Result<bool> {
        let (client, inner) = self.parts();
        client.run(crate::SyncObject::clear_expire(inner))
    }

    /// The time left before the main key expires; `None` when it does not exist or has no
    /// expiry.
    ///
    /// # Errors
    ///
    /// As [`SyncObject::remaining_ttl`](crate::SyncObject::remaining_ttl).
    fn remaining_ttl(&self) -> Result<Option<Duration>> {
        let (client, inner) = self.parts();
        client.run(crate::SyncObject::remaining_ttl(inner))
    }

    /// Deletes every key of the synchronizer; `true` when it existed.
    ///
    /// # Errors
    ///
    /// As [`SyncObject::delete`](crate::SyncObject::delete).
    fn delete(&self) -> Result<bool> {
        let (client, inner) = self.parts();
        client.run(crate::SyncObject::delete(inner))
    }
}

/// A held lock, released when dropped (in the background) or by [`unlock`](Self::unlock). The
/// client's last handle, dropped, waits for such background releases
/// ([`Client::shutdown`](Client::shutdown)).
#[must_use = "dropping the guard releases the lock at once (in the background)"]
#[derive(Debug)]
pub struct LockGuard {
    pub(super) client: Client,
    pub(super) guard: Option<HoldGuard>,
    /// The tasks of the [`on_lost`](Self::on_lost) callbacks, stopped with the guard.
    pub(super) watchers: Watchers,
}

/// The tasks of a guard's loss callbacks ([`LockGuard::on_lost`],
/// [`ExpirablePermit::on_lost`]), stopped when the guard is released or dropped.
#[derive(Debug, Default)]
pub(super) struct Watchers(std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>);

impl Watchers {
    /// Calls `callback` on `client`'s runtime when `lost` (a guard's owned loss signal)
    /// resolves, unless stopped first.
    pub(super) fn watch(
        &self,
        client: &Client,
        lost: impl Future<Output = LossReason> + Send + 'static,
        callback: impl FnOnce(LossReason) + Send + 'static,
    ) {
        let task = client.runtime.spawn(async move {
            callback(lost.await);
        });
        if let Ok(mut watchers) = self.0.lock() {
            watchers.push(task);
        }
    }

    pub(super) fn stop(&self) {
        if let Ok(mut watchers) = self.0.lock() {
            for task in watchers.drain(..) {
                task.abort();
            }
        }
    }
}

impl LockGuard {
    fn inner(&self) -> Option<&HoldGuard> {
        self.guard.as_ref()
    }

    /// Releases the hold and says how it went.
    ///
    /// # Errors
    ///
    /// As [`HoldGuard::unlock`]: [`Error::LeaseLost`] when the hold had been lost.
    pub fn unlock(mut self) -> Result<()> {
        self.watchers.stop();
        self.client.finish(self.guard.take(), HoldGuard::unlock)
    }

    /// `Ok(())` while the hold is held; [`Error::LeaseLost`] once it is lost. Call it before
    /// each step that must run under the lock.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] with the reason.
    pub fn ensure_held(&self) -> Result<()> {
        self.inner().map_or(Ok(()), HoldGuard::ensure_held)
    }

    /// Whether the hold was lost.
    pub fn is_lost(&self) -> bool {
        self.inner().is_some_and(HoldGuard::is_lost)
    }

    /// Why the hold was lost, or `None` while it is held.
    pub fn loss_reason(&self) -> Option<LossReason> {
        self.inner().and_then(HoldGuard::loss_reason)
    }

    /// Calls `callback` (on the client's runtime thread) if the hold is lost while this guard
    /// lives, as soon as the watchdog knows: before the lease can have run out on the server.
    /// Not called after the guard is released or dropped.
    pub fn on_lost(&self, callback: impl FnOnce(LossReason) + Send + 'static) {
        if let Some(guard) = self.inner() {
            self.watchers
                .watch(&self.client, guard.lost_owned(), callback);
        }
    }

    /// Sets the remaining fixed lease to `lease` from now, if the hold still stands
    /// ([`HoldGuard::extend`]).
    ///
    /// # Errors
    ///
    /// As [`HoldGuard::extend`].
    pub fn extend(&self, lease: Duration) -> Result<()> {
        match self.inner() {
            Some(guard) => self.client.run(guard.extend(lease)),
            None => Err(Error::LeaseLost(LossReason::NotHeld)),
        }
    }

    /// The fencing token (fenced locks and write locks).
    pub fn token(&self) -> Option<u64> {
        self.inner().and_then(HoldGuard::token)
    }

    /// The async guard underneath.
    pub fn as_async(&self) -> Option<&HoldGuard> {
        self.inner()
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        self.watchers.stop();
        self.client.drop_inside(self.guard.take());
    }
}

/// A read-write lock, blocking: each side is a [`BlockingLock`].
#[cfg(feature = "rwlock")]
#[derive(Debug, Clone)]
pub struct ReadWriteLock {
    pub(super) client: Client,
    pub(super) inner: crate::ReadWriteLock,
}

#[cfg(feature = "rwlock")]
impl ReadWriteLock {
    /// The read side: shared with other readers.
    pub fn read_lock(&self) -> BlockingLock<crate::ReadLock> {
        self.client.wrap(self.inner.read_lock())
    }

    /// The write side: alone.
    pub fn write_lock(&self) -> BlockingLock<crate::WriteLock> {
        self.client.wrap(self.inner.write_lock())
    }
}

blocking_calls!("rwlock", ReadWriteLock, "ReadWriteLock" => {
    /// Whether either side is held.
    fn is_locked() -> bool;
    /// Which side holds the lock, if any.
    fn mode() -> Option<crate::Mode>;
    /// Frees both sides whoever holds them; `true` when something was held.
    fn force_unlock() -> bool;
});

#[cfg(feature = "fair-lock")]
impl BlockingLock<crate::FairLock> {
    /// How many acquisitions wait in the fair lock's queue.
    ///
    /// # Errors
    ///
    /// As [`FairLock::queue_length`](crate::FairLock::queue_length).
    pub fn queue_length(&self) -> Result<usize> {
        self.client.run(self.inner.queue_length())
    }
}

#[cfg(feature = "fair-lock")]
impl BlockingLock<crate::FairLock> {
    /// This lock with another waiter timeout
    /// ([`FairLock::with_waiter_timeout`](crate::FairLock::with_waiter_timeout)).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] under 100 ms.
    pub fn with_waiter_timeout(&self, timeout: Duration) -> Result<Self> {
        Ok(self.client.wrap(self.inner.with_waiter_timeout(timeout)?))
    }
}

#[cfg(feature = "spin-lock")]
impl BlockingLock<crate::SpinLock> {
    /// This lock with waiters pausing as `backoff` says
    /// ([`SpinLock::with_backoff`](crate::SpinLock::with_backoff)).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a backoff out of bounds.
    pub fn with_backoff(&self, backoff: crate::Backoff) -> Result<Self> {
        Ok(self.client.wrap(self.inner.with_backoff(backoff)?))
    }
}

#[cfg(feature = "faster-multilock")]
impl BlockingLock<crate::FasterMultiLock> {
    /// Unlocks the values of `part` (made by this lock's
    /// [`FasterMultiLock::part`](crate::FasterMultiLock::part), through
    /// [`as_async`](Self::as_async)) from the hold `guard` in one call, and returns the guard of
    /// the values it keeps (those of the part's [`rest`](crate::Part::rest)), `None` when it
    /// keeps none. The loss callbacks of `guard` end with it.
    ///
    /// # Errors
    ///
    /// As [`Part::unlock`](crate::Part::unlock).
    pub fn unlock_part(
        &self,
        part: &crate::Part,
        mut guard: LockGuard,
    ) -> Result<Option<LockGuard>> {
        guard.watchers.stop();
        let Some(held) = guard.guard.take() else {
            return Ok(None);
        };
        let kept = self.client.run(part.unlock(held))?;
        Ok(kept.map(|kept| self.client.guard(kept)))
    }
}
