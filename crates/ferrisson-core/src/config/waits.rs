//! The settings of waits on record and deadlock detection (`crate::waits`).

use std::time::Duration;

use super::ClientConfig;

impl ClientConfig {
    /// Finds deadlocks across processes (**\[ext\]**, off by default): every `interval`
    /// while one of this client's waits has lasted a quarter of it, the client reads the
    /// wait-for graph (the waits on record of every client, the holders of what they wait for)
    /// and, when its wait closes a cycle, fails the one waiter the cycle's rule picks with
    /// [`Error::Deadlock`](crate::Error::Deadlock); the others go on once it gives back what it
    /// holds. Every process computes the same victim from the same records: the task whose
    /// latest wait began last. A cycle is found within about one `interval` of forming.
    ///
    /// What counts: locks of every kind (holders and fair queues), and semaphores whose
    /// taken permits are known (an expirable semaphore, a semaphore with a
    /// [limit](https://docs.rs/ferrisson-semaphore)); a plain semaphore without one is never
    /// taken as blocking for certain. Holds belong to the Tokio task that took them (outside
    /// a task, as in a `block_on` or the blocking API, to the thread), and a task waits as
    /// long as all of its waits do (futures joined in one task count as one task). Needs the client's record ([`with_client_record`](Self::with_client_record));
    /// waits are on record without it too, after [`WAIT_RECORD_AFTER`](crate::WAIT_RECORD_AFTER).
    ///
    /// The victim's acquisition ends as a cancelled one would (what a try in flight took is
    /// given back in the background), with the error.
    ///
    /// `interval` is at least 10 ms; `Duration::ZERO` turns detection off.
    pub fn with_deadlock_detection(mut self, interval: Duration) -> Self {
        self.deadlock_detection = (!interval.is_zero()).then_some(interval);
        self
    }

    /// The deadlock detection's interval, when on ([`with_deadlock_detection`](Self::with_deadlock_detection)).
    pub fn deadlock_detection(&self) -> Option<Duration> {
        self.deadlock_detection
    }

    /// How long a wait lasts before the client writes it into its record (**\[ext\]**,
    /// docs/protocol.md "\[ext\] Waits on record"; default
    /// [`WAIT_RECORD_AFTER`](crate::WAIT_RECORD_AFTER), 1 s): shorter shows waits sooner in
    /// `ferrisson waits`, longer writes fewer of them; `Duration::MAX` keeps waits off the
    /// record. With deadlock detection on, a wait is written after a quarter of its interval
    /// whatever this says (the detection reads them).
    pub fn with_wait_record_delay(mut self, delay: Duration) -> Self {
        self.wait_record_delay = delay;
        self
    }

    /// How long a wait lasts before it goes on record: a quarter of the deadlock detection's
    /// interval when it is on, else [`with_wait_record_delay`](Self::with_wait_record_delay)'s
    /// (`None`: never).
    pub fn wait_record_delay(&self) -> Option<Duration> {
        match self.deadlock_detection {
            Some(interval) => Some(interval / 4),
            None => (self.wait_record_delay != Duration::MAX).then_some(self.wait_record_delay),
        }
    }
}
