//! MultiLock and RedLock, blocking.

use super::*;

/// A [`MultiLock`](crate::MultiLock) (`RED = false`) or a [`RedLock`](crate::RedLock)
/// (`RED = true`), blocking: see [`Client::multi_lock`] and [`Client::red_lock`]. Taking it
/// returns a [`MultiGuard`].
#[cfg(feature = "multilock")]
#[derive(Debug, Clone)]
pub struct LockGroup<const RED: bool> {
    pub(super) client: Client,
    pub(super) inner: crate::LockGroup<RED>,
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
        let guard = self.client.run(self.inner.lock_with(options))?;
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
        let guard = self.client.run(self.inner.try_lock_with(options))?;
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
    pub(super) client: Client,
    pub(super) guard: Option<crate::MultiGuard>,
    /// The tasks of the [`on_lost`](Self::on_lost) callbacks, stopped with the guard.
    pub(super) watchers: Watchers,
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
            Some(guard) => self.client.run(guard.extend(lease)),
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
