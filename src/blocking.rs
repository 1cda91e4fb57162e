//! A blocking API, in the spirit of `reqwest::blocking` and redis-rs's sync connection, for
//! code without an async runtime: CLI tools, sync web frameworks, batch jobs.
//!
//! A [`Client`] owns a small Tokio runtime (one worker thread) on which the async client, its
//! watchdog and its subscriber connection run; each blocking call runs the async call on it
//! and waits. Guards release on drop, as the async ones do (in the background), and carry the
//! loss signal as a check ([`LockGuard::ensure_held`]) and as a callback
//! ([`LockGuard::on_lost`]).
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let server = ferrisson_testkit::RedisServer::spawn();
//! # let url = server.url();
//! use ferrisson::blocking::Client;
//!
//! let client = Client::connect(&url)?;
//! let lock = client.reentrant_lock("nightly-export")?;
//! let guard = lock.lock()?;
//! guard.on_lost(|reason| eprintln!("stop: the lock is gone ({reason})"));
//! guard.ensure_held()?; // before each step the lock protects
//! guard.unlock()?;
//! # Ok(()) }
//! ```
//!
//! Blocking calls must not be made from inside an async runtime (Tokio panics when a thread
//! that drives async tasks blocks on another runtime): use the async API there.
//!
//! # Cancel safety
//!
//! A blocking call cannot be cancelled; a guard dropped without `unlock` releases in the
//! background, as the async guard's drop does.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::Runtime;

use ferrisson_core::{AcquireOptions, ClientConfig, Error, HoldGuard, LossReason, Result};

/// A blocking client: the async [`Client`](crate::Client) and the runtime it runs on. Cheap to
/// clone; when the last clone (and every handle and guard made from it) is gone, it shuts the
/// async client down ([`Client::shutdown`](crate::Client::shutdown): the releases of dropped
/// guards land first) and stops the runtime.
#[derive(Clone)]
pub struct Client {
    runtime: Arc<Owned>,
    client: crate::Client,
}

/// The runtime a blocking client owns, and the client it shuts down when the last handle goes.
struct Owned {
    runtime: Runtime,
    client: crate::Client,
}

impl std::ops::Deref for Owned {
    type Target = Runtime;

    fn deref(&self) -> &Runtime {
        &self.runtime
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        // Blocking inside an async runtime would panic; the blocking API is not for there.
        if tokio::runtime::Handle::try_current().is_ok() {
            tracing::warn!(
                "a blocking client dropped inside an async runtime: background releases may be cut short"
            );
            return;
        }
        if let Err(e) = self.runtime.block_on(self.client.shutdown()) {
            tracing::warn!(error = %e, "the blocking client's shutdown left work unfinished");
        }
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("blocking::Client")
            .field("id", &self.client.id())
            .finish()
    }
}

impl Client {
    /// Connects to the deployment `url` names ([`ClientConfig::new`]).
    ///
    /// # Errors
    ///
    /// As [`Client::connect`](crate::Client::connect), and [`Error::Closed`] when the runtime
    /// cannot start.
    pub fn connect(url: &str) -> Result<Self> {
        Self::with_config(ClientConfig::new(url))
    }

    /// Connects with `config`.
    ///
    /// # Errors
    ///
    /// As [`connect`](Self::connect).
    pub fn with_config(config: ClientConfig) -> Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("ferrisson-blocking")
            .enable_all()
            .build()
            .map_err(|e| {
                tracing::warn!(error = %e, "the blocking client's runtime could not start");
                Error::Closed("the blocking client's runtime could not start")
            })?;
        let client = runtime.block_on(crate::Client::with_config(config))?;
        Ok(Self {
            runtime: Arc::new(Owned {
                runtime,
                client: client.clone(),
            }),
            client,
        })
    }

    /// Shuts the client down now ([`Client::shutdown`](crate::Client::shutdown)): no new
    /// acquisitions, and every release of a dropped guard lands before this returns. The last
    /// clone's drop does the same; call this to learn how it went.
    ///
    /// # Errors
    ///
    /// As [`Client::shutdown`](crate::Client::shutdown).
    pub fn shutdown(&self) -> Result<()> {
        self.block_on(self.client.shutdown())
    }

    /// The async client underneath, for what this module does not wrap (with
    /// [`block_on`](Self::block_on)).
    pub fn async_client(&self) -> &crate::Client {
        &self.client
    }

    /// Runs any async call of the library on the client's runtime and waits for it.
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    /// A reentrant lock named `name` ([`ReentrantLock`](crate::ReentrantLock)).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for an empty name.
    #[cfg(feature = "lock")]
    pub fn reentrant_lock(&self, name: &str) -> Result<BlockingLock<crate::ReentrantLock>> {
        Ok(self.wrap(crate::ReentrantLock::new(&self.client, name)?))
    }

    /// A fenced reentrant lock named `name` (`ReentrantLock::fenced`): its guards carry tokens.
    ///
    /// # Errors
    ///
    /// As [`reentrant_lock`](Self::reentrant_lock).
    #[cfg(feature = "lock")]
    pub fn fenced_lock(&self, name: &str) -> Result<BlockingLock<crate::ReentrantLock>> {
        Ok(self.wrap(crate::ReentrantLock::fenced(&self.client, name)?))
    }

    /// A lean mutex named `name` ([`Mutex`](crate::Mutex), **\[ext\]**: the standard Redlock
    /// layout).
    ///
    /// # Errors
    ///
    /// As [`reentrant_lock`](Self::reentrant_lock).
    #[cfg(feature = "lock")]
    pub fn mutex(&self, name: &str) -> Result<BlockingLock<crate::Mutex>> {
        Ok(self.wrap(crate::Mutex::new(&self.client, name)?))
    }

    /// A fenced lean mutex named `name` (`Mutex::fenced`): its guards carry tokens.
    ///
    /// # Errors
    ///
    /// As [`reentrant_lock`](Self::reentrant_lock).
    #[cfg(feature = "lock")]
    pub fn fenced_mutex(&self, name: &str) -> Result<BlockingLock<crate::Mutex>> {
        Ok(self.wrap(crate::Mutex::fenced(&self.client, name)?))
    }

    /// A fair lock named `name` ([`FairLock`](crate::FairLock)).
    ///
    /// # Errors
    ///
    /// As [`reentrant_lock`](Self::reentrant_lock).
    #[cfg(feature = "fair-lock")]
    pub fn fair_lock(&self, name: &str) -> Result<BlockingLock<crate::FairLock>> {
        Ok(self.wrap(crate::FairLock::new(&self.client, name)?))
    }

    /// A spin lock named `name` ([`SpinLock`](crate::SpinLock)).
    ///
    /// # Errors
    ///
    /// As [`reentrant_lock`](Self::reentrant_lock).
    #[cfg(feature = "spin-lock")]
    pub fn spin_lock(&self, name: &str) -> Result<BlockingLock<crate::SpinLock>> {
        Ok(self.wrap(crate::SpinLock::new(&self.client, name)?))
    }

    /// A rate limiter named `name` ([`RateLimiter`](crate::RateLimiter)).
    ///
    /// # Errors
    ///
    /// As [`reentrant_lock`](Self::reentrant_lock).
    #[cfg(feature = "rate-limiter")]
    pub fn rate_limiter(&self, name: &str) -> Result<RateLimiter> {
        Ok(RateLimiter {
            client: self.clone(),
            inner: crate::RateLimiter::new(&self.client, name)?,
        })
    }

    /// A read-write lock named `name` ([`ReadWriteLock`](crate::ReadWriteLock)): its
    /// [`read_lock`](ReadWriteLock::read_lock) and [`write_lock`](ReadWriteLock::write_lock).
    ///
    /// # Errors
    ///
    /// As [`reentrant_lock`](Self::reentrant_lock).
    #[cfg(feature = "rwlock")]
    pub fn read_write_lock(&self, name: &str) -> Result<ReadWriteLock> {
        Ok(ReadWriteLock {
            client: self.clone(),
            inner: crate::ReadWriteLock::new(&self.client, name)?,
        })
    }

    /// A semaphore named `name` ([`Semaphore`](crate::Semaphore)).
    ///
    /// # Errors
    ///
    /// As [`reentrant_lock`](Self::reentrant_lock).
    #[cfg(feature = "semaphore")]
    pub fn semaphore(&self, name: &str) -> Result<Semaphore> {
        Ok(Semaphore {
            client: self.clone(),
            inner: crate::Semaphore::new(&self.client, name)?,
        })
    }

    /// A permit-expirable semaphore named `name`
    /// ([`ExpirableSemaphore`](crate::ExpirableSemaphore)).
    ///
    /// # Errors
    ///
    /// As [`reentrant_lock`](Self::reentrant_lock).
    #[cfg(feature = "expirable-semaphore")]
    pub fn expirable_semaphore(&self, name: &str) -> Result<ExpirableSemaphore> {
        Ok(ExpirableSemaphore {
            client: self.clone(),
            inner: crate::ExpirableSemaphore::new(&self.client, name)?,
        })
    }

    /// A countdown latch named `name` ([`CountDownLatch`](crate::CountDownLatch)).
    ///
    /// # Errors
    ///
    /// As [`reentrant_lock`](Self::reentrant_lock).
    #[cfg(feature = "latch")]
    pub fn count_down_latch(&self, name: &str) -> Result<CountDownLatch> {
        Ok(CountDownLatch {
            client: self.clone(),
            inner: crate::CountDownLatch::new(&self.client, name)?,
        })
    }

    /// Any lock kind (an async [`Lock`](crate::Lock) made from
    /// [`async_client`](Self::async_client)), blocking.
    pub fn wrap<L: crate::Lock>(&self, lock: L) -> BlockingLock<L> {
        BlockingLock {
            client: self.clone(),
            inner: lock,
        }
    }

    /// Ends a held thing of this client with `end` (its async release), waiting for it;
    /// nothing to do when it was already given up.
    fn finish<T, F>(&self, held: Option<T>, end: impl FnOnce(T) -> F) -> Result<()>
    where
        F: Future<Output = Result<()>>,
    {
        held.map_or(Ok(()), |held| self.block_on(end(held)))
    }

    /// Drops a held thing inside the client's runtime: an async guard's drop releases on a
    /// task of the runtime.
    fn drop_inside<T>(&self, held: Option<T>) {
        if let Some(held) = held {
            let _runtime = self.runtime.enter();
            drop(held);
        }
    }

    fn guard(&self, guard: HoldGuard) -> LockGuard {
        LockGuard {
            client: self.clone(),
            guard: Some(guard),
            watchers: Watchers::default(),
        }
    }
}

/// A lock of any kind, blocking: the reentrant, fenced and fair locks and either side of a
/// read-write lock. Taking it returns a [`LockGuard`].
#[derive(Debug, Clone)]
pub struct BlockingLock<L> {
    client: Client,
    inner: L,
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
        let guard = self.client.block_on(self.inner.acquire(options))?;
        Ok(guard.map(|g| self.client.guard(g)))
    }

    /// Whether any owner holds the lock.
    ///
    /// # Errors
    ///
    /// [`Error::Redis`].
    pub fn is_locked(&self) -> Result<bool> {
        self.client.block_on(self.inner.is_locked())
    }

    /// Frees the lock whoever holds it; `true` when it was held.
    ///
    /// # Errors
    ///
    /// [`Error::Redis`].
    pub fn force_unlock(&self) -> Result<bool> {
        self.client.block_on(self.inner.force_unlock())
    }

    /// How many holds `owner` has (Redisson's `getHoldCount` for another thread's id).
    ///
    /// # Errors
    ///
    /// As the async lock's [`hold_count_of`](crate::Lock::hold_count_of).
    pub fn hold_count_of(&self, owner: &crate::Owner) -> Result<u32> {
        self.client.block_on(self.inner.hold_count_of(owner))
    }

    /// Whether `owner` holds the lock (Redisson's `isHeldByThread(id)`; a guard's owner is
    /// [`LockGuard::as_async`]`().owner()`).
    ///
    /// # Errors
    ///
    /// As the async lock's [`is_held_by`](crate::Lock::is_held_by).
    pub fn is_held_by(&self, owner: &crate::Owner) -> Result<bool> {
        self.client.block_on(self.inner.is_held_by(owner))
    }

    /// Waits until nobody holds the lock, without taking it.
    ///
    /// # Errors
    ///
    /// As the async lock's [`wait_unlocked`](crate::Lock::wait_unlocked).
    pub fn wait_unlocked(&self) -> Result<()> {
        self.client.block_on(self.inner.wait_unlocked())
    }

    /// How many holds the handle's bound owner has (0: none).
    ///
    /// # Errors
    ///
    /// As the async lock's [`hold_count`](crate::Lock::hold_count).
    pub fn hold_count(&self) -> Result<u32> {
        self.client.block_on(self.inner.hold_count())
    }

    /// Whether the handle's bound owner holds the lock.
    ///
    /// # Errors
    ///
    /// As the async lock's [`is_held_by_current`](crate::Lock::is_held_by_current).
    pub fn is_held_by_current(&self) -> Result<bool> {
        self.client.block_on(self.inner.is_held_by_current())
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
        client.block_on(crate::SyncObject::exists(inner))
    }

    /// Sets every state key to expire in `ttl`; `true` when the synchronizer existed.
    ///
    /// # Errors
    ///
    /// As [`SyncObject::expire`](crate::SyncObject::expire).
    fn expire(&self, ttl: Duration) -> Result<bool> {
        let (client, inner) = self.parts();
        client.block_on(crate::SyncObject::expire(inner, ttl))
    }

    /// Removes the expiry of every state key; `true` when one of them had an expiry.
    ///
    /// # Errors
    ///
    /// As [`SyncObject::clear_expire`](crate::SyncObject::clear_expire).
    fn clear_expire(&self) -> Result<bool> {
        let (client, inner) = self.parts();
        client.block_on(crate::SyncObject::clear_expire(inner))
    }

    /// The time left before the main key expires; `None` when it does not exist or has no
    /// expiry.
    ///
    /// # Errors
    ///
    /// As [`SyncObject::remaining_ttl`](crate::SyncObject::remaining_ttl).
    fn remaining_ttl(&self) -> Result<Option<Duration>> {
        let (client, inner) = self.parts();
        client.block_on(crate::SyncObject::remaining_ttl(inner))
    }

    /// Deletes every key of the synchronizer; `true` when it existed.
    ///
    /// # Errors
    ///
    /// As [`SyncObject::delete`](crate::SyncObject::delete).
    fn delete(&self) -> Result<bool> {
        let (client, inner) = self.parts();
        client.block_on(crate::SyncObject::delete(inner))
    }
}

/// Implements [`BlockingObject`] for a blocking synchronizer of `client` and `inner`.
macro_rules! blocking_object {
    ($($feature:literal => $blocking:ident($async:ty)),* $(,)?) => {$(
        #[cfg(feature = $feature)]
        impl BlockingObject for $blocking {
            type Async = $async;

            fn parts(&self) -> (&Client, &$async) {
                (&self.client, &self.inner)
            }
        }
    )*};
}

blocking_object! {
    "rwlock" => ReadWriteLock(crate::ReadWriteLock),
    "semaphore" => Semaphore(crate::Semaphore),
    "expirable-semaphore" => ExpirableSemaphore(crate::ExpirableSemaphore),
    "latch" => CountDownLatch(crate::CountDownLatch),
}

/// A held lock, released when dropped (in the background) or by [`unlock`](Self::unlock). The
/// client's last handle, dropped, waits for such background releases
/// ([`Client::shutdown`](Client::shutdown)).
#[must_use = "dropping the guard releases the lock at once (in the background)"]
#[derive(Debug)]
pub struct LockGuard {
    client: Client,
    guard: Option<HoldGuard>,
    /// The tasks of the [`on_lost`](Self::on_lost) callbacks, stopped with the guard.
    watchers: Watchers,
}

/// The tasks of a guard's loss callbacks ([`LockGuard::on_lost`],
/// [`ExpirablePermit::on_lost`]), stopped when the guard is released or dropped.
#[derive(Debug, Default)]
struct Watchers(std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>);

impl Watchers {
    /// Calls `callback` on `client`'s runtime when `lost` (a guard's owned loss signal)
    /// resolves, unless stopped first.
    fn watch(
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

    fn stop(&self) {
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
            Some(guard) => self.client.runtime.block_on(guard.extend(lease)),
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
    client: Client,
    inner: crate::ReadWriteLock,
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

/// A semaphore, blocking ([`Semaphore`](crate::Semaphore)).
#[cfg(feature = "semaphore")]
#[derive(Debug, Clone)]
pub struct Semaphore {
    client: Client,
    inner: crate::Semaphore,
}

#[cfg(feature = "semaphore")]
impl Semaphore {
    /// Sets the permits unless they are set; `true` when it set them.
    ///
    /// # Errors
    ///
    /// As [`Semaphore::try_set_permits`](crate::Semaphore::try_set_permits).
    pub fn try_set_permits(&self, permits: u32) -> Result<bool> {
        self.client.block_on(self.inner.try_set_permits(permits))
    }

    /// The permits free now.
    ///
    /// # Errors
    ///
    /// [`Error::Redis`].
    pub fn available_permits(&self) -> Result<i64> {
        self.client.block_on(self.inner.available_permits())
    }

    /// Takes a permit, waiting as long as it takes.
    ///
    /// # Errors
    ///
    /// As [`Semaphore::acquire`](crate::Semaphore::acquire).
    pub fn acquire(&self) -> Result<Permits> {
        self.acquire_many(1)
    }

    /// Takes a permit if one is free now; `None` otherwise.
    ///
    /// # Errors
    ///
    /// As [`Semaphore::try_acquire`](crate::Semaphore::try_acquire).
    pub fn try_acquire(&self) -> Result<Option<Permits>> {
        self.try_acquire_many_with(1, AcquireOptions::new())
    }

    /// Takes `n` permits, waiting as long as it takes.
    ///
    /// # Errors
    ///
    /// As [`Semaphore::acquire_many`](crate::Semaphore::acquire_many).
    pub fn acquire_many(&self, n: u32) -> Result<Permits> {
        let permits = self.client.block_on(self.inner.acquire_many(n))?;
        Ok(Permits {
            client: self.client.clone(),
            inner: Some(permits),
        })
    }

    /// Gives `n` permits back that no [`Permits`] guard holds (Redisson's `release(n)`).
    ///
    /// # Errors
    ///
    /// As [`Semaphore::release`](crate::Semaphore::release).
    pub fn release(&self, n: u32) -> Result<()> {
        self.client.block_on(self.inner.release(n))
    }

    /// Takes `n` permits within the options' wait (none given: one try): `None` when it
    /// passed.
    ///
    /// # Errors
    ///
    /// As [`Semaphore::try_acquire_many_with`](crate::Semaphore::try_acquire_many_with).
    pub fn try_acquire_many_with(
        &self,
        n: u32,
        options: crate::AcquireOptions,
    ) -> Result<Option<Permits>> {
        let permits = self
            .client
            .block_on(self.inner.try_acquire_many_with(n, options))?;
        Ok(permits.map(|p| Permits {
            client: self.client.clone(),
            inner: Some(p),
        }))
    }
}

/// Permits of a [`Semaphore`], given back when dropped (in the background) or by
/// [`release`](Self::release). The client's last handle, dropped, waits for such background
/// releases ([`Client::shutdown`](Client::shutdown)).
#[cfg(feature = "semaphore")]
#[must_use = "dropping the permits gives them back at once (in the background)"]
#[derive(Debug)]
pub struct Permits {
    client: Client,
    inner: Option<crate::Permits>,
}

#[cfg(feature = "semaphore")]
impl Permits {
    /// Gives the permits back.
    ///
    /// # Errors
    ///
    /// As [`Permits::release`](crate::Permits::release).
    pub fn release(mut self) -> Result<()> {
        self.client
            .finish(self.inner.take(), crate::Permits::release)
    }
}

#[cfg(feature = "semaphore")]
impl Drop for Permits {
    fn drop(&mut self) {
        self.client.drop_inside(self.inner.take());
    }
}

/// A permit-expirable semaphore, blocking ([`ExpirableSemaphore`](crate::ExpirableSemaphore)).
/// Its permits are [`LockGuard`]s: the loss signal and release on drop come with them.
#[cfg(feature = "expirable-semaphore")]
#[derive(Debug, Clone)]
pub struct ExpirableSemaphore {
    client: Client,
    inner: crate::ExpirableSemaphore,
}

#[cfg(feature = "expirable-semaphore")]
impl ExpirableSemaphore {
    /// Sets the permits unless they are set; `true` when it set them.
    ///
    /// # Errors
    ///
    /// As [`ExpirableSemaphore::try_set_permits`](crate::ExpirableSemaphore::try_set_permits).
    pub fn try_set_permits(&self, permits: u32) -> Result<bool> {
        self.client.block_on(self.inner.try_set_permits(permits))
    }

    /// The permits free now.
    ///
    /// # Errors
    ///
    /// [`Error::Redis`].
    pub fn available_permits(&self) -> Result<i64> {
        self.client.block_on(self.inner.available_permits())
    }

    /// Takes a permit, waiting as long as it takes, kept by the watchdog; its id is
    /// [`LockGuard::as_async`]'s owner.
    ///
    /// # Errors
    ///
    /// As [`ExpirableSemaphore::acquire`](crate::ExpirableSemaphore::acquire).
    pub fn acquire(&self) -> Result<ExpirablePermit> {
        self.acquire_with(crate::AcquireOptions::new())
    }

    /// Takes a permit as the options say: a fixed lease (none: kept by the watchdog) and a
    /// wait limit (none: as long as it takes).
    ///
    /// # Errors
    ///
    /// As [`ExpirableSemaphore::acquire_with`](crate::ExpirableSemaphore::acquire_with).
    pub fn acquire_with(&self, options: crate::AcquireOptions) -> Result<ExpirablePermit> {
        let permit = self.client.block_on(self.inner.acquire_with(options))?;
        Ok(self.permit(permit))
    }

    /// Takes a permit if one is free now, kept by the watchdog; `None` otherwise.
    ///
    /// # Errors
    ///
    /// As [`ExpirableSemaphore::try_acquire`](crate::ExpirableSemaphore::try_acquire).
    pub fn try_acquire(&self) -> Result<Option<ExpirablePermit>> {
        let permit = self.client.block_on(self.inner.try_acquire())?;
        Ok(permit.map(|p| self.permit(p)))
    }

    fn permit(&self, permit: crate::Permit) -> ExpirablePermit {
        ExpirablePermit {
            client: self.client.clone(),
            inner: Some(permit),
            watchers: Watchers::default(),
        }
    }
}

/// A permit of an [`ExpirableSemaphore`], given back when dropped (in the background) or by
/// [`release`](Self::release); it carries the loss signal of its lease. The client's last
/// handle, dropped, waits for such background releases ([`Client::shutdown`](Client::shutdown)).
#[cfg(feature = "expirable-semaphore")]
#[must_use = "dropping the permit gives it back at once (in the background)"]
#[derive(Debug)]
pub struct ExpirablePermit {
    client: Client,
    inner: Option<crate::Permit>,
    /// The tasks of the [`on_lost`](Self::on_lost) callbacks, stopped with the permit.
    watchers: Watchers,
}

#[cfg(feature = "expirable-semaphore")]
impl ExpirablePermit {
    /// The permit's id.
    pub fn id(&self) -> &str {
        self.inner.as_ref().map_or("", |p| p.id())
    }

    /// `Ok(())` while the permit is held; [`Error::LeaseLost`] once it is lost.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] with the reason.
    pub fn ensure_held(&self) -> Result<()> {
        self.inner.as_ref().map_or(Ok(()), |p| p.ensure_held())
    }

    /// Why the permit was lost, or `None` while it is held.
    pub fn loss_reason(&self) -> Option<LossReason> {
        self.inner.as_ref().and_then(|p| p.loss_reason())
    }

    /// Whether the permit was lost.
    pub fn is_lost(&self) -> bool {
        self.inner.as_ref().is_some_and(|p| p.is_lost())
    }

    /// Calls `callback` (on the client's runtime thread) if the permit is lost while it is
    /// held, as soon as the watchdog knows, as [`LockGuard::on_lost`] does.
    pub fn on_lost(&self, callback: impl FnOnce(LossReason) + Send + 'static) {
        if let Some(permit) = &self.inner {
            self.watchers
                .watch(&self.client, permit.lost_owned(), callback);
        }
    }

    /// Sets the remaining fixed lease to `lease` from now, if the permit is still taken
    /// ([`HoldGuard::extend`]).
    ///
    /// # Errors
    ///
    /// As [`HoldGuard::extend`].
    pub fn extend(&self, lease: Duration) -> Result<()> {
        match &self.inner {
            Some(permit) => self.client.block_on(permit.extend(lease)),
            None => Err(Error::LeaseLost(LossReason::NotHeld)),
        }
    }

    /// Gives the permit back.
    ///
    /// # Errors
    ///
    /// As [`Permit::release`](crate::Permit::release).
    pub fn release(mut self) -> Result<()> {
        self.watchers.stop();
        self.client
            .finish(self.inner.take(), crate::Permit::release)
    }
}

#[cfg(feature = "expirable-semaphore")]
impl Drop for ExpirablePermit {
    fn drop(&mut self) {
        self.watchers.stop();
        self.client.drop_inside(self.inner.take());
    }
}

/// A countdown latch, blocking ([`CountDownLatch`](crate::CountDownLatch)).
#[cfg(feature = "latch")]
#[derive(Debug, Clone)]
pub struct CountDownLatch {
    client: Client,
    inner: crate::CountDownLatch,
}

#[cfg(feature = "latch")]
impl CountDownLatch {
    /// Arms the latch at `count` unless it is armed; `true` when it armed it.
    ///
    /// # Errors
    ///
    /// As [`CountDownLatch::try_set_count`](crate::CountDownLatch::try_set_count).
    pub fn try_set_count(&self, count: u32) -> Result<bool> {
        self.client.block_on(self.inner.try_set_count(count))
    }

    /// Arms the latch at `count` for a new round unless it is armed, even after a completed
    /// round; `true` when it armed it.
    ///
    /// # Errors
    ///
    /// As [`CountDownLatch::try_set_count_new_round`](crate::CountDownLatch::try_set_count_new_round).
    pub fn try_set_count_new_round(&self, count: u32) -> Result<bool> {
        self.client
            .block_on(self.inner.try_set_count_new_round(count))
    }

    /// Where the latch stands: armed, open after a completed round, or open.
    ///
    /// # Errors
    ///
    /// As [`CountDownLatch::status`](crate::CountDownLatch::status).
    pub fn status(&self) -> Result<crate::LatchStatus> {
        self.client.block_on(self.inner.status())
    }

    /// Counts down by one.
    ///
    /// # Errors
    ///
    /// As [`CountDownLatch::count_down`](crate::CountDownLatch::count_down).
    pub fn count_down(&self) -> Result<()> {
        self.client.block_on(self.inner.count_down())
    }

    /// Counts down once for `participant`, however often it calls, and says what happened
    /// ([`CountDown`](crate::CountDown)).
    ///
    /// # Errors
    ///
    /// As [`CountDownLatch::count_down_once`](crate::CountDownLatch::count_down_once).
    pub fn count_down_once(&self, participant: &str) -> Result<crate::CountDown> {
        self.client
            .block_on(self.inner.count_down_once(participant))
    }

    /// The count now.
    ///
    /// # Errors
    ///
    /// [`Error::Redis`].
    pub fn count(&self) -> Result<u64> {
        self.client.block_on(self.inner.count())
    }

    /// Waits until the latch opens.
    ///
    /// # Errors
    ///
    /// As [`CountDownLatch::wait`](crate::CountDownLatch::wait).
    pub fn wait(&self) -> Result<()> {
        self.client.block_on(self.inner.wait())
    }

    /// Waits at most `timeout`; `true` when the latch opened.
    ///
    /// # Errors
    ///
    /// As [`CountDownLatch::wait_for`](crate::CountDownLatch::wait_for).
    pub fn wait_for(&self, timeout: Duration) -> Result<bool> {
        self.client.block_on(self.inner.wait_for(timeout))
    }
}

/// A rate limiter, blocking ([`RateLimiter`](crate::RateLimiter)).
#[cfg(feature = "rate-limiter")]
#[derive(Debug, Clone)]
pub struct RateLimiter {
    client: Client,
    inner: crate::RateLimiter,
}

#[cfg(feature = "rate-limiter")]
impl RateLimiter {
    /// Sets the rate unless one is set; `true` when it set it.
    ///
    /// # Errors
    ///
    /// As [`RateLimiter::try_set_rate`](crate::RateLimiter::try_set_rate).
    pub fn try_set_rate(
        &self,
        kind: crate::RateType,
        rate: u64,
        interval: Duration,
    ) -> Result<bool> {
        self.client
            .block_on(self.inner.try_set_rate(kind, rate, interval))
    }

    /// Sets the rate in any case, starting its window afresh.
    ///
    /// # Errors
    ///
    /// As [`RateLimiter::set_rate`](crate::RateLimiter::set_rate).
    pub fn set_rate(&self, kind: crate::RateType, rate: u64, interval: Duration) -> Result<()> {
        self.client
            .block_on(self.inner.set_rate(kind, rate, interval))
    }

    /// The permits left in the window now.
    ///
    /// # Errors
    ///
    /// As [`RateLimiter::available_permits`](crate::RateLimiter::available_permits).
    pub fn available_permits(&self) -> Result<u64> {
        self.client.block_on(self.inner.available_permits())
    }

    /// Takes `permits`, waiting as long as the rate says.
    ///
    /// # Errors
    ///
    /// As [`RateLimiter::acquire`](crate::RateLimiter::acquire).
    pub fn acquire(&self, permits: u32) -> Result<()> {
        self.client.block_on(self.inner.acquire(permits))
    }

    /// Takes `permits` if the rate allows it now; `false` otherwise.
    ///
    /// # Errors
    ///
    /// As [`RateLimiter::try_acquire`](crate::RateLimiter::try_acquire).
    pub fn try_acquire(&self, permits: u32) -> Result<bool> {
        self.client.block_on(self.inner.try_acquire(permits))
    }

    /// Takes `permits` within the options' wait; `false` when it passed.
    ///
    /// # Errors
    ///
    /// As [`RateLimiter::try_acquire_with`](crate::RateLimiter::try_acquire_with).
    pub fn try_acquire_with(&self, permits: u32, options: AcquireOptions) -> Result<bool> {
        self.client
            .block_on(self.inner.try_acquire_with(permits, options))
    }

    /// Gives `permits` back to the window (Redisson's `release`).
    ///
    /// # Errors
    ///
    /// As [`RateLimiter::release`](crate::RateLimiter::release).
    pub fn release(&self, permits: u32) -> Result<()> {
        self.client.block_on(self.inner.release(permits))
    }
}

/// A [`MultiLock`](crate::MultiLock) (`RED = false`) or a [`RedLock`](crate::RedLock)
/// (`RED = true`), blocking: see [`Client::multi_lock`] and [`Client::red_lock`]. Taking it
/// returns a [`MultiGuard`].
#[cfg(feature = "multilock")]
#[derive(Debug, Clone)]
pub struct LockGroup<const RED: bool> {
    client: Client,
    inner: crate::LockGroup<RED>,
}

/// A [`MultiLock`](crate::MultiLock), blocking: every lock of the group, or none.
#[cfg(feature = "multilock")]
pub type MultiLock = LockGroup<false>;

/// A [`RedLock`](crate::RedLock), blocking: a quorum of independent instances.
#[cfg(feature = "multilock")]
pub type RedLock = LockGroup<true>;

#[cfg(feature = "multilock")]
impl Client {
    /// A [`MultiLock`](crate::MultiLock) over `locks`, driven on this client's runtime. The
    /// locks may come from other blocking clients (a [`BlockingLock`] turns into one with
    /// `.into()`) or be async locks of any client.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = ferrisson_testkit::RedisServer::spawn();
    /// # let url = server.url();
    /// use ferrisson::blocking::Client;
    ///
    /// let client = Client::connect(&url)?;
    /// let from = client.reentrant_lock("account:17")?;
    /// let to = client.reentrant_lock("account:42")?;
    /// let both = client.multi_lock(vec![from.into(), to.into()])?;
    /// let guard = both.lock()?;
    /// guard.ensure_held()?; // before the transfer
    /// guard.unlock()?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`MultiLock::new`](crate::MultiLock::new): [`Error::InvalidArgument`] for no
    /// locks or a lock twice.
    pub fn multi_lock(&self, locks: Vec<Box<dyn crate::AnyLock>>) -> Result<MultiLock> {
        Ok(LockGroup {
            client: self.clone(),
            inner: crate::MultiLock::new(locks)?,
        })
    }

    /// A [`RedLock`](crate::RedLock) over `locks`, one per independent instance (each from a
    /// client of its own), driven on this client's runtime.
    ///
    /// # Errors
    ///
    /// As [`RedLock::new`](crate::RedLock::new).
    pub fn red_lock(&self, locks: Vec<Box<dyn crate::AnyLock>>) -> Result<RedLock> {
        Ok(LockGroup {
            client: self.clone(),
            inner: crate::RedLock::new(locks)?,
        })
    }
}

#[cfg(feature = "multilock")]
impl<L: crate::Lock + 'static> From<BlockingLock<L>> for Box<dyn crate::AnyLock> {
    fn from(lock: BlockingLock<L>) -> Self {
        Box::new(lock.inner)
    }
}

#[cfg(feature = "multilock")]
impl<const RED: bool> LockGroup<RED> {
    /// Takes the locks, waiting as long as it takes.
    ///
    /// # Errors
    ///
    /// As [`LockGroup::lock`](crate::LockGroup::lock).
    pub fn lock(&self) -> Result<MultiGuard> {
        self.lock_with(AcquireOptions::new())
    }

    /// Takes the locks with options; running out of wait time is [`Error::Timeout`].
    ///
    /// # Errors
    ///
    /// As [`LockGroup::lock_with`](crate::LockGroup::lock_with).
    pub fn lock_with(&self, options: AcquireOptions) -> Result<MultiGuard> {
        let guard = self.client.block_on(self.inner.lock_with(options))?;
        Ok(self.guard(guard))
    }

    /// One round, no waiting: `None` when a lock (a RedLock: the quorum) could not be had.
    ///
    /// # Errors
    ///
    /// As [`LockGroup::try_lock`](crate::LockGroup::try_lock).
    pub fn try_lock(&self) -> Result<Option<MultiGuard>> {
        self.try_lock_with(AcquireOptions::new())
    }

    /// Takes the locks within the options' wait limit; `None` when that was not possible.
    ///
    /// # Errors
    ///
    /// As [`LockGroup::try_lock_with`](crate::LockGroup::try_lock_with).
    pub fn try_lock_with(&self, options: AcquireOptions) -> Result<Option<MultiGuard>> {
        let guard = self.client.block_on(self.inner.try_lock_with(options))?;
        Ok(guard.map(|guard| self.guard(guard)))
    }

    /// Takes the locks, runs `work` and releases them, as the async
    /// [`with`](crate::LockGroup::with) does: `work`'s output, or [`Error::LeaseLost`] when
    /// the guard was lost while it ran (a blocking closure cannot be cut off: check
    /// [`MultiGuard::ensure_held`] between its steps). A failed unlock after the work is
    /// logged.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock), and [`Error::LeaseLost`].
    pub fn with<T>(&self, work: impl FnOnce(&MultiGuard) -> T) -> Result<T> {
        run_held(self.lock()?, work, || self.keys().join(", "))
    }

    /// The keys of the locks, in order.
    pub fn keys(&self) -> Vec<&str> {
        self.inner.keys()
    }

    /// The async group underneath.
    pub fn as_async(&self) -> &crate::LockGroup<RED> {
        &self.inner
    }

    fn guard(&self, guard: crate::MultiGuard) -> MultiGuard {
        MultiGuard {
            client: self.client.clone(),
            guard: Some(guard),
            watchers: Watchers::default(),
        }
    }
}

/// The holds of a [`MultiLock`] or a [`RedLock`] as one, released when dropped (in the
/// background) or by [`unlock`](Self::unlock).
#[cfg(feature = "multilock")]
#[must_use = "dropping the guard releases the locks at once (in the background)"]
#[derive(Debug)]
pub struct MultiGuard {
    client: Client,
    guard: Option<crate::MultiGuard>,
    /// The tasks of the [`on_lost`](Self::on_lost) callbacks, stopped with the guard.
    watchers: Watchers,
}

#[cfg(feature = "multilock")]
impl MultiGuard {
    /// Releases every hold and says how it went.
    ///
    /// # Errors
    ///
    /// As [`MultiGuard::unlock`](crate::MultiGuard::unlock).
    pub fn unlock(mut self) -> Result<()> {
        self.watchers.stop();
        self.client
            .finish(self.guard.take(), crate::MultiGuard::unlock)
    }

    /// `Ok(())` while held (a RedLock: a quorum); [`Error::LeaseLost`] once lost.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] with the reason.
    pub fn ensure_held(&self) -> Result<()> {
        self.guard
            .as_ref()
            .map_or(Ok(()), crate::MultiGuard::ensure_held)
    }

    /// Whether the guard was lost.
    pub fn is_lost(&self) -> bool {
        self.loss_reason().is_some()
    }

    /// Why the guard was lost, or `None` while it is held.
    pub fn loss_reason(&self) -> Option<LossReason> {
        self.guard.as_ref().and_then(crate::MultiGuard::loss_reason)
    }

    /// Calls `callback` (on the client's runtime thread) if the guard is lost while it lives,
    /// as [`LockGuard::on_lost`] does. Not called after the guard is released or dropped.
    pub fn on_lost(&self, callback: impl FnOnce(LossReason) + Send + 'static) {
        if let Some(guard) = &self.guard {
            self.watchers
                .watch(&self.client, guard.lost_owned(), callback);
        }
    }

    /// Sets the remaining lease of every hold to `lease` from now, if a quorum (a MultiLock:
    /// every lock) still holds.
    ///
    /// # Errors
    ///
    /// As [`MultiGuard::extend`](crate::MultiGuard::extend).
    pub fn extend(&self, lease: Duration) -> Result<()> {
        match &self.guard {
            Some(guard) => self.client.block_on(guard.extend(lease)),
            None => Err(Error::LeaseLost(LossReason::NotHeld)),
        }
    }

    /// The largest fencing token among the holds (`None` when no lock is fenced).
    pub fn token(&self) -> Option<u64> {
        self.guard.as_ref().and_then(crate::MultiGuard::token)
    }

    /// Until when a RedLock taken with a fixed lease is valid; `None` otherwise.
    pub fn valid_until(&self) -> Option<std::time::Instant> {
        self.guard
            .as_ref()
            .and_then(crate::MultiGuard::valid_until)
            .map(tokio::time::Instant::into_std)
    }

    /// The async guard underneath.
    pub fn as_async(&self) -> Option<&crate::MultiGuard> {
        self.guard.as_ref()
    }
}

#[cfg(feature = "multilock")]
impl Drop for MultiGuard {
    fn drop(&mut self) {
        self.watchers.stop();
        self.client.drop_inside(self.guard.take());
    }
}

/// Blocking forms of async calls that return plain values: each runs the async call of the
/// same name on the client's runtime and waits.
macro_rules! blocking_calls {
    ($feature:literal, $blocking:ident, $async:literal => {
        $( $(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty; )*
    }) => {
        #[cfg(feature = $feature)]
        impl $blocking {
            $(
                $(#[$doc])*
                ///
                /// # Errors
                ///
                #[doc = concat!("As [`", $async, "::", stringify!($name), "`](crate::", $async, "::", stringify!($name), ").")]
                pub fn $name(&self, $($arg: $ty),*) -> Result<$ret> {
                    self.client.block_on(self.inner.$name($($arg),*))
                }
            )*
        }
    };
}

blocking_calls!("semaphore", Semaphore, "Semaphore" => {
    /// Sets the permits, whatever they were.
    fn set_permits(permits: u32) -> ();
    /// Sets the permits unless they are set, the key expiring in `ttl`; `true` when it set them.
    fn try_set_permits_with_ttl(permits: u32, ttl: Duration) -> bool;
    /// Adds `delta` permits (negative: takes them away); the count after.
    fn add_permits(delta: i64) -> i64;
    /// Takes every free permit at once; how many.
    fn drain_permits() -> u64;
    /// Gives `n` permits back only if the semaphore exists; `true` when it did.
    fn release_if_exists(n: u32) -> bool;
});

#[cfg(feature = "semaphore")]
impl Semaphore {
    /// Takes `n` permits if they are free now; `None` otherwise.
    ///
    /// # Errors
    ///
    /// As [`Semaphore::try_acquire_many`](crate::Semaphore::try_acquire_many).
    pub fn try_acquire_many(&self, n: u32) -> Result<Option<Permits>> {
        self.try_acquire_many_with(n, AcquireOptions::new())
    }

    /// Takes a permit within the options' wait (none given: one try); `None` when it passed.
    ///
    /// # Errors
    ///
    /// As [`Semaphore::try_acquire_with`](crate::Semaphore::try_acquire_with).
    pub fn try_acquire_with(&self, options: AcquireOptions) -> Result<Option<Permits>> {
        self.try_acquire_many_with(1, options)
    }

    /// Takes a permit, runs `work` and gives the permit back, as the async
    /// [`with`](crate::Semaphore::with) does: `work`'s output (a failed release after it is
    /// logged).
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    pub fn with<T>(&self, work: impl FnOnce() -> T) -> Result<T> {
        run_held(self.acquire()?, |_| work(), || self.inner.key().to_owned())
    }
}

#[cfg(feature = "semaphore")]
impl Permits {
    /// How many permits these are.
    pub fn count(&self) -> u32 {
        self.inner.as_ref().map_or(0, crate::Permits::count)
    }

    /// Lets go of the permits without giving them back: they stay taken until someone
    /// [`release`](Semaphore::release)s that many.
    pub fn forget(mut self) {
        if let Some(permits) = self.inner.take() {
            permits.forget();
        }
    }
}

blocking_calls!("expirable-semaphore", ExpirableSemaphore, "ExpirableSemaphore" => {
    /// Sets the permits, whatever they were.
    fn set_permits(permits: u32) -> ();
    /// Adds `delta` permits (negative: takes them away); the count after.
    fn add_permits(delta: i64) -> i64;
    /// The permits taken now.
    fn acquired_permits() -> i64;
    /// The permits there are, free and taken.
    fn total_permits() -> i64;
    /// The lease left of the permit `id`; `None` when it is not taken.
    fn remaining_lease(id: &str) -> Option<Duration>;
    /// Sets the lease of the permit `id` to `lease` from now; `false` when it is not taken.
    fn update_lease(id: &str, lease: Duration) -> bool;
    /// Gives the permit `id` back (a permit taken elsewhere, known by its id).
    fn release(id: &str) -> ();
    /// Gives the permit `id` back; `false` when it was not taken.
    fn try_release(id: &str) -> bool;
    /// Gives back those of the permits `ids` that are held (the others are skipped); how many
    /// it released.
    fn try_release_many(ids: &[&str]) -> usize;
    /// Gives every permit of `ids` back, or none.
    fn release_all(ids: &[&str]) -> ();
});

#[cfg(feature = "expirable-semaphore")]
impl ExpirableSemaphore {
    fn permits(&self, permits: Vec<crate::Permit>) -> Vec<ExpirablePermit> {
        permits.into_iter().map(|p| self.permit(p)).collect()
    }

    /// Takes `n` permits, waiting as long as it takes, kept by the watchdog.
    ///
    /// # Errors
    ///
    /// As [`ExpirableSemaphore::acquire_many`](crate::ExpirableSemaphore::acquire_many).
    pub fn acquire_many(&self, n: u32) -> Result<Vec<ExpirablePermit>> {
        self.acquire_many_with(n, AcquireOptions::new())
    }

    /// Takes `n` permits as the options say (a fixed lease, a wait limit).
    ///
    /// # Errors
    ///
    /// As [`ExpirableSemaphore::acquire_many_with`](crate::ExpirableSemaphore::acquire_many_with).
    pub fn acquire_many_with(
        &self,
        n: u32,
        options: AcquireOptions,
    ) -> Result<Vec<ExpirablePermit>> {
        let permits = self
            .client
            .block_on(self.inner.acquire_many_with(n, options))?;
        Ok(self.permits(permits))
    }

    /// Takes `n` permits if they are free now; `None` otherwise.
    ///
    /// # Errors
    ///
    /// As [`ExpirableSemaphore::try_acquire_many`](crate::ExpirableSemaphore::try_acquire_many).
    pub fn try_acquire_many(&self, n: u32) -> Result<Option<Vec<ExpirablePermit>>> {
        self.try_acquire_many_with(n, AcquireOptions::new())
    }

    /// Takes a permit within the options' wait (none given: one try); `None` when it passed.
    ///
    /// # Errors
    ///
    /// As [`ExpirableSemaphore::try_acquire_with`](crate::ExpirableSemaphore::try_acquire_with).
    pub fn try_acquire_with(&self, options: AcquireOptions) -> Result<Option<ExpirablePermit>> {
        let permit = self.client.block_on(self.inner.try_acquire_with(options))?;
        Ok(permit.map(|p| self.permit(p)))
    }

    /// Takes `n` permits within the options' wait (none given: one try); `None` when it
    /// passed.
    ///
    /// # Errors
    ///
    /// As [`ExpirableSemaphore::try_acquire_many_with`](crate::ExpirableSemaphore::try_acquire_many_with).
    pub fn try_acquire_many_with(
        &self,
        n: u32,
        options: AcquireOptions,
    ) -> Result<Option<Vec<ExpirablePermit>>> {
        let permits = self
            .client
            .block_on(self.inner.try_acquire_many_with(n, options))?;
        Ok(permits.map(|p| self.permits(p)))
    }

    /// Takes a permit, runs `work` and gives the permit back, as the async
    /// [`with`](crate::ExpirableSemaphore::with) does: `work`'s output, or
    /// [`Error::LeaseLost`] when the permit was lost while it ran (a blocking closure cannot
    /// be cut off: check [`ExpirablePermit::ensure_held`] between its steps).
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire), and [`Error::LeaseLost`].
    pub fn with<T>(&self, work: impl FnOnce(&ExpirablePermit) -> T) -> Result<T> {
        run_held(self.acquire()?, work, || self.inner.key().to_owned())
    }
}

#[cfg(feature = "expirable-semaphore")]
impl ExpirablePermit {
    /// Keeps the permit taken without this handle, and returns its id, to release it by
    /// ([`ExpirableSemaphore::release`]). The watchdog stops renewing it: it returns to the
    /// pool when its lease runs out unless released first.
    pub fn detach(mut self) -> String {
        self.watchers.stop();
        self.inner
            .take()
            .map(crate::Permit::detach)
            .unwrap_or_default()
    }
}

blocking_calls!("rate-limiter", RateLimiter, "RateLimiter" => {
    /// Sets the rate as `args` say (a keep-alive) unless one is set; `true` when it set it.
    fn try_set_rate_with(args: crate::RateArgs) -> bool;
    /// Sets the rate as `args` say, whatever it was.
    fn set_rate_with(args: crate::RateArgs) -> ();
    /// Changes the rate of a limiter that has one; `false` (nothing written) when it has none.
    fn update_rate(args: crate::RateArgs) -> bool;
    /// The rate set: its kind, permits and interval; `None` when none is.
    fn rate() -> Option<(crate::RateType, u64, Duration)>;
});

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
        self.client.block_on(self.inner.queue_length())
    }
}

#[cfg(feature = "semaphore")]
impl Semaphore {
    /// This semaphore with a limit: the first acquisition sets the count to `limit` if no
    /// count is set ([`Semaphore::with_limit`](crate::Semaphore::with_limit)).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a limit of 0.
    pub fn with_limit(&self, limit: u32) -> Result<Self> {
        Ok(Self {
            client: self.client.clone(),
            inner: self.inner.with_limit(limit)?,
        })
    }
}

#[cfg(feature = "expirable-semaphore")]
impl ExpirableSemaphore {
    /// This semaphore with a limit: the first acquisition sets the permits to `limit` if
    /// none are set
    /// ([`ExpirableSemaphore::with_limit`](crate::ExpirableSemaphore::with_limit)).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a limit of 0.
    pub fn with_limit(&self, limit: u32) -> Result<Self> {
        Ok(Self {
            client: self.client.clone(),
            inner: self.inner.with_limit(limit)?,
        })
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

/// A held thing a blocking `with` runs work under: a lock's guard, a group's, permits.
trait Held {
    /// `Ok(())` while held ([`Error::LeaseLost`] once lost; permits without a lease always
    /// hold).
    fn ensure_held(&self) -> Result<()>;

    /// Gives it back.
    fn end(self) -> Result<()>;
}

/// The blocking `with`s, once: `work` on `held`, the loss checked after it (a blocking closure
/// cannot be cut off), then the release; a failed release is logged (naming `what`), as the
/// async `with`s log theirs, and the hold ends with its lease.
fn run_held<H: Held, T>(
    held: H,
    work: impl FnOnce(&H) -> T,
    what: impl FnOnce() -> String,
) -> Result<T> {
    let out = work(&held);
    held.ensure_held()?;
    if let Err(e) = held.end() {
        tracing::warn!(key = %what(), error = %e, "the work ran while held, but the release after it failed: the hold ends with its lease");
    }
    Ok(out)
}

#[cfg(feature = "multilock")]
impl Held for MultiGuard {
    fn ensure_held(&self) -> Result<()> {
        MultiGuard::ensure_held(self)
    }

    fn end(self) -> Result<()> {
        self.unlock()
    }
}

#[cfg(feature = "expirable-semaphore")]
impl Held for ExpirablePermit {
    fn ensure_held(&self) -> Result<()> {
        ExpirablePermit::ensure_held(self)
    }

    fn end(self) -> Result<()> {
        self.release()
    }
}

impl Held for LockGuard {
    fn ensure_held(&self) -> Result<()> {
        LockGuard::ensure_held(self)
    }

    fn end(self) -> Result<()> {
        self.unlock()
    }
}

#[cfg(feature = "semaphore")]
impl Held for Permits {
    fn ensure_held(&self) -> Result<()> {
        Ok(())
    }

    fn end(self) -> Result<()> {
        self.release()
    }
}
