//! Fenced locks, blocking: [`Fenced`], whose guards ([`FencedLockGuard`]) always carry a token.

use super::*;

/// A fenced lock, blocking: the fenced reentrant lock ([`Client::fenced_lock`]) or the fenced
/// lean mutex ([`Client::fenced_mutex`]). Its `lock`, `try_lock` and `with` give a
/// [`FencedLockGuard`], whose [`token`](FencedLockGuard::token) is a plain `u64`; everything
/// else is the [`BlockingLock`]'s, which it dereferences to.
#[derive(Debug, Clone)]
pub struct Fenced<L> {
    lock: BlockingLock<L>,
}

impl<L> std::ops::Deref for Fenced<L> {
    type Target = BlockingLock<L>;

    fn deref(&self) -> &BlockingLock<L> {
        &self.lock
    }
}

impl<L: crate::Lock> Fenced<L> {
    pub(super) fn new(lock: BlockingLock<L>) -> Self {
        Self { lock }
    }

    /// Takes the lock, waiting as long as it takes.
    ///
    /// # Errors
    ///
    /// As [`BlockingLock::lock`].
    pub fn lock(&self) -> Result<FencedLockGuard> {
        FencedLockGuard::new(self.lock.lock()?)
    }

    /// Takes the lock with options; running out of wait time is [`Error::Timeout`].
    ///
    /// # Errors
    ///
    /// As [`BlockingLock::lock_with`].
    pub fn lock_with(&self, options: AcquireOptions) -> Result<FencedLockGuard> {
        FencedLockGuard::new(self.lock.lock_with(options)?)
    }

    /// One try, no waiting: `None` when another owner holds it.
    ///
    /// # Errors
    ///
    /// As [`BlockingLock::try_lock`].
    pub fn try_lock(&self) -> Result<Option<FencedLockGuard>> {
        self.lock.try_lock()?.map(FencedLockGuard::new).transpose()
    }

    /// Takes the lock within the options' wait limit: `None` when it passed.
    ///
    /// # Errors
    ///
    /// As [`BlockingLock::try_lock_with`].
    pub fn try_lock_with(&self, options: AcquireOptions) -> Result<Option<FencedLockGuard>> {
        self.lock
            .try_lock_with(options)?
            .map(FencedLockGuard::new)
            .transpose()
    }

    /// Takes the lock, runs `work` and releases, as [`BlockingLock::with`] does; the work gets
    /// the [`FencedLockGuard`]: its token, `is_lost` and `ensure_held`.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock), and [`Error::LeaseLost`].
    pub fn with<T>(&self, work: impl FnOnce(&FencedLockGuard) -> T) -> Result<T> {
        run_held(self.lock()?, work, || {
            crate::Lock::key(self.lock.as_async()).to_owned()
        })
    }
}

impl<L: crate::Lock> BlockingObject for Fenced<L> {
    type Async = L;

    fn parts(&self) -> (&Client, &L) {
        self.lock.parts()
    }
}

#[cfg(feature = "multilock")]
impl<L: crate::Lock + 'static> From<Fenced<L>> for Box<dyn crate::AnyLock> {
    fn from(lock: Fenced<L>) -> Self {
        lock.lock.into()
    }
}

/// A held fenced lock: a [`LockGuard`] (which it dereferences to, for `ensure_held`, `is_lost`,
/// `on_lost` and the rest) whose token is always there. Released when dropped (in the
/// background) or by [`unlock`](Self::unlock).
#[must_use = "dropping the guard releases the lock at once (in the background)"]
#[derive(Debug)]
pub struct FencedLockGuard {
    guard: LockGuard,
    token: u64,
}

impl FencedLockGuard {
    fn new(guard: LockGuard) -> Result<Self> {
        match guard.token() {
            Some(token) => Ok(Self { guard, token }),
            None => Err(Error::Protocol(format!(
                "fenced lock `{}` was acquired without a token",
                guard.as_async().map_or("", HoldGuard::key)
            ))),
        }
    }

    /// The fencing token of this acquisition: strictly greater than every earlier one's.
    pub fn token(&self) -> u64 {
        self.token
    }

    /// Releases the hold and says how it went.
    ///
    /// # Errors
    ///
    /// As [`LockGuard::unlock`].
    pub fn unlock(self) -> Result<()> {
        self.guard.unlock()
    }
}

impl std::ops::Deref for FencedLockGuard {
    type Target = LockGuard;

    fn deref(&self) -> &LockGuard {
        &self.guard
    }
}

impl Held for FencedLockGuard {
    fn ensure_held(&self) -> Result<()> {
        self.guard.ensure_held()
    }

    fn end(self) -> Result<()> {
        self.unlock()
    }
}
