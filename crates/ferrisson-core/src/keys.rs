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

/// The id of one release call. The call latches its result under
/// [`latch_key`](Self::latch_key) for the retry window, so that a retry after a lost reply
/// counts once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestId(u128);

impl RequestId {
    /// A random id, as a UUID v4 is: ids of different calls and clients do not collide.
    pub fn random() -> Self {
        Self(uuid::Uuid::new_v4().as_u128())
    }

    /// `<prefix>:<the id in 32 lowercase hex digits>`, written without the formatting
    /// machinery (one per release, on the hot path of every lock).
    pub fn latch_key(self, prefix: &str) -> String {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut digits = [0u8; 32];
        for (i, digit) in digits.iter_mut().enumerate() {
            let nibble = (self.0 >> ((31 - i) * 4)) & 0xf;
            *digit = HEX[nibble as usize];
        }
        let mut key = String::with_capacity(prefix.len() + 33);
        key.push_str(prefix);
        key.push(':');
        key.push_str(std::str::from_utf8(&digits).unwrap_or_default());
        key
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
    fn latch_keys_carry_the_id_in_hex() {
        let id = RequestId(0x0123_4567_89ab_cdef_0000_0000_0000_00ff);
        assert_eq!(
            id.latch_key("redisson_unlock_latch:{orders}"),
            "redisson_unlock_latch:{orders}:0123456789abcdef00000000000000ff"
        );
        assert_eq!(RequestId(1).latch_key("p"), format!("p:{:032x}", 1u128));
        assert_ne!(RequestId::random(), RequestId::random());
    }

    #[test]
    fn empty_names_are_rejected() {
        assert!(matches!(validate_name(""), Err(Error::InvalidArgument(_))));
        assert!(validate_name("x").is_ok());
    }
}
