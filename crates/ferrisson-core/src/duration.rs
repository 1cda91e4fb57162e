//! Durations at the edges: any `Duration` a caller passes is either used as given or refused
//! with a clear error, never truncated and never a panic.
//!
//! - A *wait* (how long to wait for a lock, a permit, a latch) of any length is valid; one so
//!   long that no clock can reach its end (`Duration::MAX`) means "no limit".
//! - A *lease* (how long Redis keeps a hold) goes to Redis as whole milliseconds and must be
//!   one it accepts: at least one millisecond and at most [`MAX_LEASE`]. Anything else is
//!   [`Error::InvalidArgument`] before anything is sent.

use std::time::Duration;

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
    }
}
