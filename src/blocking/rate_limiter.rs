//! The rate limiter, blocking.

use super::*;

/// A rate limiter, blocking ([`RateLimiter`](crate::RateLimiter)).
#[cfg(feature = "rate-limiter")]
#[derive(Debug, Clone)]
pub struct RateLimiter {
    pub(super) client: Client,
    pub(super) inner: crate::RateLimiter,
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
            .run(self.inner.try_set_rate(kind, rate, interval))
    }

    /// Sets the rate in any case, starting its window afresh.
    ///
    /// # Errors
    ///
    /// As [`RateLimiter::set_rate`](crate::RateLimiter::set_rate).
    pub fn set_rate(&self, kind: crate::RateType, rate: u64, interval: Duration) -> Result<()> {
        self.client.run(self.inner.set_rate(kind, rate, interval))
    }

    /// The permits left in the window now.
    ///
    /// # Errors
    ///
    /// As [`RateLimiter::available_permits`](crate::RateLimiter::available_permits).
    pub fn available_permits(&self) -> Result<u64> {
        self.client.run(self.inner.available_permits())
    }

    /// Takes `permits`, waiting as long as the rate says.
    ///
    /// # Errors
    ///
    /// As [`RateLimiter::acquire`](crate::RateLimiter::acquire).
    pub fn acquire(&self, permits: u32) -> Result<()> {
        self.client.run(self.inner.acquire(permits))
    }

    /// Takes `permits` if the rate allows it now; `false` otherwise.
    ///
    /// # Errors
    ///
    /// As [`RateLimiter::try_acquire`](crate::RateLimiter::try_acquire).
    pub fn try_acquire(&self, permits: u32) -> Result<bool> {
        self.client.run(self.inner.try_acquire(permits))
    }

    /// Takes `permits` within the options' wait; `false` when it passed.
    ///
    /// # Errors
    ///
    /// As [`RateLimiter::try_acquire_with`](crate::RateLimiter::try_acquire_with).
    pub fn try_acquire_with(&self, permits: u32, options: AcquireOptions) -> Result<bool> {
        self.client
            .run(self.inner.try_acquire_with(permits, options))
    }

    /// Gives `permits` back to the window (Redisson's `release`).
    ///
    /// # Errors
    ///
    /// As [`RateLimiter::release`](crate::RateLimiter::release).
    pub fn release(&self, permits: u32) -> Result<()> {
        self.client.run(self.inner.release(permits))
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
