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
//! Scoped, the work gets the guard: a fenced lock's token (a plain `u64`), `is_lost` and `ensure_held`
//! before each step (a blocking closure cannot be cut off at the loss as async work is, so
//! `with` checks after it too):
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let server = ferrisson_testkit::RedisServer::spawn();
//! # let url = server.url();
//! use ferrisson::blocking::Client;
//!
//! let client = Client::connect(&url)?;
//! let ledger = client.fenced_lock("ledger")?;
//! let stamped = ledger.with(|guard| -> ferrisson::Result<u64> {
//!     guard.ensure_held()?; // before the write
//!     let token: u64 = guard.token();
//!     assert!(!guard.is_lost());
//!     Ok(token) // ... the write, stamped with `token` ...
//! })??;
//! assert!(stamped > 0);
//! # Ok(()) }
//! ```
//!
//! A blocking closure cannot be cut off as async work is: it checks before each step, and
//! `with` checks after it, so work whose lock went ends with [`Error::LeaseLost`]:
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let server = ferrisson_testkit::RedisServer::spawn();
//! # let url = server.url();
//! use std::time::Duration;
//! use ferrisson::blocking::Client;
//! use ferrisson::{ClientConfig, Error};
//!
//! // A 900 ms lease: the watchdog renews every 300 ms, and so sees a loss within that.
//! let client = Client::with_config(ClientConfig::new(&url).with_lease(Duration::from_millis(900)))?;
//! let ledger = client.fenced_lock("ledger")?;
//! let outcome = ledger
//!     .with(|guard| -> ferrisson::Result<u32> {
//!         ledger.force_unlock()?; // the lock goes (an operator; a failover would do the same)
//!         let mut steps = 0;
//!         while steps < 1_000 {
//!             guard.ensure_held()?; // before each step: stops once the loss is known
//!             steps += 1; // ... a write stamped with guard.token() ...
//!             std::thread::sleep(Duration::from_millis(20));
//!         }
//!         Ok(steps)
//!     })
//!     .and_then(|work| work);
//! assert!(matches!(outcome, Err(Error::LeaseLost(_))), "{outcome:?}");
//! # Ok(()) }
//! ```
//!
//! Blocking calls are not for a thread inside a Tokio runtime (one that drives async tasks, or
//! a `spawn_blocking` thread: Tokio cannot tell them apart for us, and blocking the first on
//! another runtime would panic): there every call, [`Client::connect`] included, returns
//! [`Error::WouldDeadlock`] and does nothing. Use the async API there.
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
    /// The runtime's handle, what every call runs through.
    handle: tokio::runtime::Handle,
    /// The runtime itself (`None` only while it is dropped).
    runtime: Option<Runtime>,
    client: crate::Client,
}

impl std::ops::Deref for Owned {
    type Target = tokio::runtime::Handle;

    fn deref(&self) -> &tokio::runtime::Handle {
        &self.handle
    }
}

/// `Ok` on a thread outside any Tokio runtime, where a blocking call may wait; else
/// [`Error::WouldDeadlock`], which every blocking call returns there instead of Tokio's panic.
fn outside_runtime() -> Result<()> {
    if tokio::runtime::Handle::try_current().is_ok() {
        tracing::debug!("a blocking call inside an async runtime refused");
        return Err(Error::WouldDeadlock(
            "a ferrisson::blocking call on a thread inside a Tokio runtime (it would block the \
             runtime): use the async API there, or call it from a thread of your own"
                .to_owned(),
        ));
    }
    Ok(())
}

impl Drop for Owned {
    fn drop(&mut self) {
        let Some(runtime) = self.runtime.take() else {
            return;
        };
        // Blocking inside an async runtime would panic, and so would dropping a runtime there.
        if outside_runtime().is_err() {
            tracing::warn!(
                "a blocking client dropped inside an async runtime: background releases may be cut short"
            );
            runtime.shutdown_background();
            return;
        }
        if let Err(e) = runtime.block_on(self.client.shutdown()) {
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
    /// As [`Client::connect`](crate::Client::connect), [`Error::Closed`] when the runtime
    /// cannot start, and [`Error::WouldDeadlock`] on a thread inside a Tokio runtime (module
    /// docs).
    pub fn connect(url: &str) -> Result<Self> {
        Self::with_config(ClientConfig::new(url))
    }

    /// Connects with `config`.
    ///
    /// # Errors
    ///
    /// As [`connect`](Self::connect).
    pub fn with_config(config: ClientConfig) -> Result<Self> {
        outside_runtime()?;
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
                handle: runtime.handle().clone(),
                runtime: Some(runtime),
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
        self.run(self.client.shutdown())
    }

    /// Shuts the client down giving work in flight `grace` to release what it holds, then
    /// gives back the rest, and says what it did
    /// ([`Client::shutdown_report`](crate::Client::shutdown_report)).
    ///
    /// # Errors
    ///
    /// [`Error::WouldDeadlock`] on a thread inside a Tokio runtime (module docs).
    pub fn shutdown_report(&self, grace: Duration) -> Result<crate::ShutdownReport> {
        self.block_on(self.client.shutdown_report(grace))
    }

    /// The async client underneath, for what this module does not wrap (with
    /// [`block_on`](Self::block_on)).
    pub fn async_client(&self) -> &crate::Client {
        &self.client
    }

    /// Runs any async call of the library on the client's runtime and waits for it.
    ///
    /// # Errors
    ///
    /// [`Error::WouldDeadlock`] on a thread inside a Tokio runtime (module docs): the future
    /// is not run.
    pub fn block_on<F: Future>(&self, future: F) -> Result<F::Output> {
        outside_runtime()?;
        Ok(self.runtime.block_on(future))
    }

    /// [`block_on`](Self::block_on) of a call that returns a `Result`.
    fn run<T>(&self, future: impl Future<Output = Result<T>>) -> Result<T> {
        self.block_on(future)?
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

    /// A fenced lock named `name` ([`FencedLock`](crate::FencedLock)): its guards'
    /// [`token`](FencedLockGuard::token)s are plain `u64`s.
    ///
    /// # Errors
    ///
    /// As [`reentrant_lock`](Self::reentrant_lock).
    #[cfg(feature = "lock")]
    pub fn fenced_lock(&self, name: &str) -> Result<Fenced<crate::FencedLock>> {
        Ok(Fenced::new(
            self.wrap(crate::FencedLock::new(&self.client, name)?),
        ))
    }

    /// A non-reentrant lock named `name` ([`NonReentrantLock`](crate::NonReentrantLock)).
    ///
    /// # Errors
    ///
    /// As [`reentrant_lock`](Self::reentrant_lock).
    #[cfg(feature = "lock")]
    pub fn non_reentrant_lock(&self, name: &str) -> Result<BlockingLock<crate::NonReentrantLock>> {
        Ok(self.wrap(crate::NonReentrantLock::new(&self.client, name)?))
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

    /// A fenced lean mutex named `name` (`Mutex::fenced`): its guards'
    /// [`token`](FencedLockGuard::token)s are plain `u64`s.
    ///
    /// # Errors
    ///
    /// As [`reentrant_lock`](Self::reentrant_lock).
    #[cfg(feature = "lock")]
    pub fn fenced_mutex(&self, name: &str) -> Result<Fenced<crate::Mutex>> {
        Ok(Fenced::new(
            self.wrap(crate::Mutex::fenced(&self.client, name)?),
        ))
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

    /// A non-reentrant fair lock named `name`
    /// ([`NonReentrantFairLock`](crate::NonReentrantFairLock)).
    ///
    /// # Errors
    ///
    /// As [`reentrant_lock`](Self::reentrant_lock).
    #[cfg(feature = "fair-lock")]
    pub fn non_reentrant_fair_lock(
        &self,
        name: &str,
    ) -> Result<BlockingLock<crate::NonReentrantFairLock>> {
        Ok(self.wrap(crate::NonReentrantFairLock::new(&self.client, name)?))
    }

    /// A faster multi-lock of `values` of the group `group`
    /// ([`FasterMultiLock`](crate::FasterMultiLock)).
    ///
    /// # Errors
    ///
    /// As [`FasterMultiLock::new`](crate::FasterMultiLock::new).
    #[cfg(feature = "faster-multilock")]
    pub fn faster_multilock<V: AsRef<str>>(
        &self,
        group: &str,
        values: impl IntoIterator<Item = V>,
    ) -> Result<BlockingLock<crate::FasterMultiLock>> {
        Ok(self.wrap(crate::FasterMultiLock::new(&self.client, group, values)?))
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
        held.map_or(Ok(()), |held| self.run(end(held)))
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
                    self.client.run(self.inner.$name($($arg),*))
                }
            )*
        }
    };
}

#[cfg(feature = "lock")]
mod fenced;
#[cfg(feature = "latch")]
mod latch;
mod locks;
#[cfg(feature = "multilock")]
mod multilock;
#[cfg(any(feature = "semaphore", feature = "expirable-semaphore"))]
mod permits;
#[cfg(feature = "rate-limiter")]
mod rate_limiter;

#[cfg(feature = "lock")]
pub use fenced::*;
#[cfg(feature = "latch")]
pub use latch::*;
pub use locks::*;
#[cfg(feature = "multilock")]
pub use multilock::*;
#[cfg(any(feature = "semaphore", feature = "expirable-semaphore"))]
pub use permits::*;
#[cfg(feature = "rate-limiter")]
pub use rate_limiter::*;

blocking_object! {
    "rwlock" => ReadWriteLock(crate::ReadWriteLock),
    "semaphore" => Semaphore(crate::Semaphore),
    "expirable-semaphore" => ExpirableSemaphore(crate::ExpirableSemaphore),
    "latch" => CountDownLatch(crate::CountDownLatch),
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
