//! Durations at the edges: any `Duration` a caller passes is either used as given or refused
//! with a clear error, never truncated and never a panic.
//!
//! - A *wait* (how long to wait for a lock, a permit, a latch) of any length is valid; one so
//!   long that no clock can reach its end (`Duration::MAX`) means "no limit".
//! - A *lease* (how long Redis keeps a hold) goes to Redis as whole milliseconds and must be
//!   one it accepts: at least one millisecond and at most [`MAX_LEASE`]. Anything else is
//!   [`Error::InvalidArgument`] before anything is sent.

use std::time::Duration;

use tokio::time::Instant;

use crate::error::{Error, Result};

/// The longest lease a hold can ask for: 2^62 milliseconds (about 146 million years). Redis
/// adds a lease to its clock in signed 64-bit milliseconds, so a lease near `i64::MAX` ms would
/// overflow there; this bound leaves room for any clock.
pub const MAX_LEASE: Duration = Duration::from_millis(1 << 62);

/// Checks a lease: at least one millisecond, at most [`MAX_LEASE`]. `what` names it in the
/// error.
///
/// # Errors
///
/// [`Error::InvalidArgument`] otherwise.
pub fn validate_lease(what: &str, lease: Duration) -> Result<()> {
    if lease < Duration::from_millis(1) {
        return Err(Error::InvalidArgument(format!(
            "{what} must be at least 1ms, got {lease:?}"
        )));
    }
    if lease > MAX_LEASE {
        return Err(Error::InvalidArgument(format!(
            "{what} must be at most {}ms, got {lease:?}",
            MAX_LEASE.as_millis()
        )));
    }
    Ok(())
}

/// A duration in whole milliseconds for a script argument, saturating (callers validate
/// leases first with [`validate_lease`]; waits and windows are bounded by construction).
pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// `d` cut to whole milliseconds, as a script argument carries it ([`millis`]): what a hold's
/// client-side deadline must count with, never the finer `Duration` the caller asked for.
pub fn whole_millis(d: Duration) -> Duration {
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
    fn leases_are_checked_at_both_ends() {
        assert!(validate_lease("lease", Duration::ZERO).is_err());
        assert!(validate_lease("lease", Duration::from_micros(999)).is_err());
        assert!(validate_lease("lease", Duration::from_millis(1)).is_ok());
        assert!(validate_lease("lease", MAX_LEASE).is_ok());
        assert!(validate_lease("lease", MAX_LEASE + Duration::from_millis(1)).is_err());
        assert!(validate_lease("lease", Duration::MAX).is_err());
        // u64::MAX ms + 1,001 ms: wrapped to 1 s by a cast, refused here.
        let wraps = Duration::from_millis(u64::MAX) + Duration::from_millis(1001);
        assert!(validate_lease("lease", wraps).is_err());
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
