//! Key and channel naming of the protocol (`docs/protocol.md`, "Names").
//!
//! Derived keys keep the Redis Cluster hash slot of the object's own key, so that every key a
//! script touches lives in one slot.

use crate::error::{Error, Result};

/// `p:{name}`, or `p:name` when `name` already carries a hash tag.
pub fn prefixed(prefix: &str, name: &str) -> String {
    if name.contains('{') {
        format!("{prefix}:{name}")
    } else {
        format!("{prefix}:{{{name}}}")
    }
}

/// `{name}:s`, or `name:s` when `name` already carries a hash tag.
pub fn suffixed(name: &str, suffix: &str) -> String {
    if name.contains('{') {
        format!("{name}:{suffix}")
    } else {
        format!("{{{name}}}:{suffix}")
    }
}

/// Checks a user-given object name: it must not be empty.
///
/// # Errors
///
/// [`Error::InvalidArgument`] for an empty name.
pub fn validate_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::InvalidArgument(
            "object name must not be empty".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_keys_keep_the_slot_of_the_name() {
        assert_eq!(
            prefixed("redisson_lock__channel", "orders"),
            "redisson_lock__channel:{orders}"
        );
        assert_eq!(
            prefixed("redisson_lock__channel", "{orders}:1"),
            "redisson_lock__channel:{orders}:1"
        );
        assert_eq!(suffixed("orders", "timeout"), "{orders}:timeout");
        assert_eq!(suffixed("{orders}", "timeout"), "{orders}:timeout");
    }

    #[test]
    fn empty_names_are_rejected() {
        assert!(matches!(validate_name(""), Err(Error::InvalidArgument(_))));
        assert!(validate_name("x").is_ok());
    }
}
