//! The options of every acquire that waits: how long to wait, how long to hold.

use std::time::Duration;

use crate::error::Result;

/// How long to wait for a hold (a lock, permits), and how long to keep it: the one options type
/// of every acquire that waits (`lock_with`/`try_lock_with` of the locks, `acquire_with`/
/// `try_acquire_with` of the semaphores, the rate limiter's `try_acquire_with`). A `try_*` call
/// waits at most the wait given (none: one try); a kind whose holds have no lease (a
/// `Semaphore`'s permits, a rate limiter's) refuses options with one.
///
/// ```
/// use std::time::Duration;
/// use ferrisson_core::AcquireOptions;
///
/// let options = AcquireOptions::new()
///     .with_wait(Duration::from_secs(2))
///     .with_lease(Duration::from_secs(10));
/// assert_eq!(options.wait(), Some(Duration::from_secs(2)));
/// assert_eq!(options.lease(), Some(Duration::from_secs(10)));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AcquireOptions {
    wait: Option<Duration>,
    lease: Option<Duration>,
}

impl AcquireOptions {
    /// Wait without a time limit; hold with the watchdog.
    pub fn new() -> Self {
        Self::default()
    }

    /// Give up after waiting this long (zero: try once).
    pub fn with_wait(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    /// Hold for this fixed lease, with no watchdog: the lock ends by itself when the lease runs
    /// out, and the guard's loss signal fires then. At least one millisecond.
    pub fn with_lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease);
        self
    }

    /// The wait limit, if any.
    pub fn wait(&self) -> Option<Duration> {
        self.wait
    }

    /// The fixed lease, if any (`None`: the watchdog keeps the hold).
    pub fn lease(&self) -> Option<Duration> {
        self.lease
    }

    /// Checks the options: a fixed lease is at least one millisecond and at most
    /// [`MAX_LEASE`](crate::duration::MAX_LEASE). Any wait is valid (`Duration::MAX`: no limit).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) otherwise.
    pub fn validate(&self) -> Result<()> {
        match self.lease {
            Some(lease) => crate::duration::validate_lease("lease", lease),
            None => Ok(()),
        }
    }
}

/// The wait limit of `options` for an acquire on `key`, whose permits have no lease of their
/// own (a semaphore's, a rate limiter's).
///
/// # Errors
///
/// [`Error::InvalidArgument`](crate::Error::InvalidArgument) when the options carry a lease.
pub fn wait_without_lease(options: AcquireOptions, key: &str) -> Result<Option<Duration>> {
    match options.lease {
        Some(_) => Err(crate::Error::InvalidArgument(format!(
            "the permits of `{key}` have no lease; the options may set a wait only"
        ))),
        None => Ok(options.wait),
    }
}
