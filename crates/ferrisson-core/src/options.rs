//! The options of a lock call: how long to wait, how long to hold.

use std::time::Duration;

use crate::error::Result;

/// How long to wait for a lock, and how long to hold it.
///
/// ```
/// use std::time::Duration;
/// use ferrisson_core::LockOptions;
///
/// let options = LockOptions::new()
///     .with_wait(Duration::from_secs(2))
///     .with_lease(Duration::from_secs(10));
/// assert_eq!(options.wait(), Some(Duration::from_secs(2)));
/// assert_eq!(options.lease(), Some(Duration::from_secs(10)));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LockOptions {
    wait: Option<Duration>,
    lease: Option<Duration>,
}

impl LockOptions {
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
