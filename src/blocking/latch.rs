//! The countdown latch, blocking.

use super::*;

/// A countdown latch, blocking ([`CountDownLatch`](crate::CountDownLatch)).
#[cfg(feature = "latch")]
#[derive(Debug, Clone)]
pub struct CountDownLatch {
    pub(super) client: Client,
    pub(super) inner: crate::CountDownLatch,
}

#[cfg(feature = "latch")]
impl CountDownLatch {
    /// Arms the latch at `count` unless it is armed; `true` when it armed it.
    ///
    /// # Errors
    ///
    /// As [`CountDownLatch::try_set_count`](crate::CountDownLatch::try_set_count).
    pub fn try_set_count(&self, count: u32) -> Result<bool> {
        self.client.run(self.inner.try_set_count(count))
    }

    /// Arms the latch at `count` for a new round unless it is armed, even after a completed
    /// round; `true` when it armed it.
    ///
    /// # Errors
    ///
    /// As [`CountDownLatch::try_set_count_new_round`](crate::CountDownLatch::try_set_count_new_round).
    pub fn try_set_count_new_round(&self, count: u32) -> Result<bool> {
        self.client.run(self.inner.try_set_count_new_round(count))
    }

    /// Where the latch stands: armed, open after a completed round, or open.
    ///
    /// # Errors
    ///
    /// As [`CountDownLatch::status`](crate::CountDownLatch::status).
    pub fn status(&self) -> Result<crate::LatchStatus> {
        self.client.run(self.inner.status())
    }

    /// Counts down by one.
    ///
    /// # Errors
    ///
    /// As [`CountDownLatch::count_down`](crate::CountDownLatch::count_down).
    pub fn count_down(&self) -> Result<()> {
        self.client.run(self.inner.count_down())
    }

    /// Counts down once for `participant`, however often it calls, and says what happened
    /// ([`CountDown`](crate::CountDown)).
    ///
    /// # Errors
    ///
    /// As [`CountDownLatch::count_down_once`](crate::CountDownLatch::count_down_once).
    pub fn count_down_once(&self, participant: &str) -> Result<crate::CountDown> {
        self.client.run(self.inner.count_down_once(participant))
    }

    /// The count now.
    ///
    /// # Errors
    ///
    /// [`Error::Redis`].
    pub fn count(&self) -> Result<u64> {
        self.client.run(self.inner.count())
    }

    /// Waits until the latch opens.
    ///
    /// # Errors
    ///
    /// As [`CountDownLatch::wait`](crate::CountDownLatch::wait).
    pub fn wait(&self) -> Result<()> {
        self.client.run(self.inner.wait())
    }

    /// Waits at most `timeout`; `true` when the latch opened.
    ///
    /// # Errors
    ///
    /// As [`CountDownLatch::wait_for`](crate::CountDownLatch::wait_for).
    pub fn wait_for(&self, timeout: Duration) -> Result<bool> {
        self.client.run(self.inner.wait_for(timeout))
    }
}
