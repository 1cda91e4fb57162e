//! Durations and instants as the engine counts them: whole milliseconds for script arguments,
//! deadlines that never overflow the clock.

use std::time::Duration;

use tokio::time::Instant;

use crate::duration::MAX_LEASE;

/// A duration in whole milliseconds for a script argument, saturating (callers validate
/// leases first with [`validate_lease`](crate::duration::validate_lease); waits and windows are bounded by construction).
pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// `d` cut to whole milliseconds, as a script argument carries it ([`millis`]): what a hold's
/// client-side deadline must count with, never the finer `Duration` the caller asked for.
pub(crate) fn whole_millis(d: Duration) -> Duration {
    Duration::from_millis(millis(d))
}

/// The deadline of a wait of `wait` from now; `None` (no limit) when it lies beyond what the
/// clock can represent, as `Duration::MAX` does.
pub fn deadline_after(wait: Duration) -> Option<Instant> {
    Instant::now().checked_add(wait)
}

/// `at + d`, or a moment far enough away to never come when that overflows the clock.
pub fn later(at: Instant, d: Duration) -> Instant {
    at.checked_add(d)
        .or_else(|| at.checked_add(MAX_LEASE))
        .unwrap_or(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn milliseconds_saturate_and_cut() {
        let wraps = Duration::from_millis(u64::MAX) + Duration::from_millis(1001);
        assert_eq!(millis(wraps), u64::MAX);
        assert_eq!(
            whole_millis(Duration::from_micros(1_999)),
            Duration::from_millis(1)
        );
    }

    #[tokio::test]
    async fn an_endless_wait_has_no_deadline_and_later_never_panics() {
        assert_eq!(deadline_after(Duration::MAX), None);
        assert!(deadline_after(Duration::from_secs(1)).is_some());
        let now = Instant::now();
        assert!(later(now, Duration::MAX) > now);
        assert_eq!(
            later(now, Duration::from_secs(1)),
            now + Duration::from_secs(1)
        );
    }
}
