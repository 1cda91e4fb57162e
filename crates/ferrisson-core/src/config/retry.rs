//! How failed calls are retried: [`RetryPolicy`] and its [`Backoff`].

use std::time::Duration;

/// Pauses that grow: `min` after the first failure, doubling up to `max`. The one backoff of
/// the library: the client's retries ([`RetryPolicy::backoff`]) and the spin lock's polling
/// waiters use it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The first pause.
    pub min: Duration,
    /// The longest pause.
    pub max: Duration,
}

impl Backoff {
    /// The same pause every time.
    pub const fn fixed(pause: Duration) -> Self {
        Self {
            min: pause,
            max: pause,
        }
    }

    /// The pause after failure number `n` (0-based): `min × 2^n`, at most `max`.
    pub fn delay(&self, n: u32) -> Duration {
        let factor = 1u32.checked_shl(n).unwrap_or(u32::MAX);
        self.min
            .checked_mul(factor)
            .unwrap_or(self.max)
            .min(self.max)
    }
}

/// How calls that failed on a broken connection are retried.
///
/// Every call the synchronizers make is idempotent (acquires carry the hold count the client
/// believes it has, releases are recorded in the client's record on the object), so a call whose reply was lost can be sent
/// again safely.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts after the first one.
    pub retries: u32,
    /// The pauses between attempts: `min` before the first retry, doubled for each further
    /// one, at most `max`.
    pub backoff: Backoff,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            retries: 3,
            backoff: Backoff {
                min: Duration::from_millis(50),
                max: Duration::from_secs(1),
            },
        }
    }
}

impl RetryPolicy {
    /// Pause before retry number `retry` (1-based).
    pub fn pause(&self, retry: u32) -> Duration {
        self.backoff.delay(retry.saturating_sub(1))
    }

    /// An upper bound of the time a call and all its retries can take.
    pub fn window(&self, response_timeout: Duration) -> Duration {
        let attempts = self.retries.saturating_add(1);
        response_timeout
            .saturating_add(self.backoff.max)
            .checked_mul(attempts)
            .unwrap_or(Duration::from_secs(3600))
    }
}
