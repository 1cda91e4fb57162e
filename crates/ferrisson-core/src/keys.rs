//! Key and channel naming of the protocol ([`docs/protocol.md`](https://github.com/ferrisson/ferrisson/blob/main/docs/protocol.md), "Names").
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

/// The Redis Cluster hash slot of `key` (0..16384): CRC16 (XMODEM) of its hash tag (the part
/// between the first `{` and the next `}`, when not empty), else of the whole key, as
/// `CLUSTER KEYSLOT` computes it.
pub(crate) fn hash_slot(key: &str) -> u16 {
    let bytes = key.as_bytes();
    let tagged = bytes.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &bytes[open + 1..];
        rest.iter()
            .position(|&b| b == b'}')
            .filter(|&close| close > 0)
            .map(|close| &rest[..close])
    });
    crc16(tagged.unwrap_or(bytes)) % 16384
}

/// CRC16-CCITT (XMODEM): polynomial 0x1021, initial value 0, as Redis Cluster uses.
fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in bytes {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
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

    /// The id of a client (its UUID's 128 bits): the request id of the client's own latches,
    /// one per lock, that its releases overwrite.
    pub(crate) fn of_client(id: &uuid::Uuid) -> Self {
        Self(id.as_u128())
    }

    /// The id in 32 lowercase hex digits, written without the formatting machinery (one per
    /// release, on the hot path of every lock).
    pub fn hex(self) -> [u8; 32] {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut digits = [0u8; 32];
        for (i, digit) in digits.iter_mut().enumerate() {
            let nibble = (self.0 >> ((31 - i) * 4)) & 0xf;
            *digit = HEX[nibble as usize];
        }
        digits
    }

    /// `<prefix>:<the id in 32 lowercase hex digits>`.
    pub fn latch_key(self, prefix: &str) -> String {
        let mut key = String::with_capacity(prefix.len() + 33);
        key.push_str(prefix);
        key.push(':');
        key.push_str(std::str::from_utf8(&self.hex()).unwrap_or_default());
        key
    }
}

/// Checks a user-given object name: it must not be empty.
///
/// # Errors
///
/// [`Error::InvalidArgument`] for an empty name.
pub(crate) fn validate_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::InvalidArgument(
            "object name must not be empty".into(),
        ));
    }
    Ok(())
}

/// Whether `key` carries a hash tag: a `{` followed, later, by a `}` with something between
/// (Redis Cluster hashes only that part).
pub(crate) fn has_hash_tag(key: &str) -> bool {
    key.split_once('{')
        .and_then(|(_, rest)| rest.find('}'))
        .is_some_and(|end| end > 0)
}

/// On a cluster, every key and channel derived from a name must hash like the name: true when
/// the name has no `{` (derived keys wrap it in one), or carries a hash tag (derived keys keep
/// it). A name like `job{` or `a{}b` would scatter its keys over several slots.
pub(crate) fn validate_cluster_name(key: &str) -> Result<()> {
    if key.contains('{') && !has_hash_tag(key) {
        return Err(Error::InvalidArgument(format!(
            "`{key}` has a `{{` but no hash tag (`{{tag}}`, not empty): on a Redis Cluster its keys would land in different slots; use a name without braces or with a tag such as `{{orders}}:42`"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn cluster_names_need_a_real_hash_tag_once_they_have_a_brace() {
        for ok in ["plain", "{tag}", "a{tag}b", "{t}{u}", "x}y"] {
            assert!(validate_cluster_name(ok).is_ok(), "{ok}");
        }
        for bad in ["job{", "job{}", "a}b{c", "{}{x}"] {
            assert!(validate_cluster_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn hash_slots_are_redis_clusters() {
        // Values of CLUSTER KEYSLOT.
        assert_eq!(hash_slot("foo"), 12182);
        assert_eq!(hash_slot("123456789"), 12739);
        assert_eq!(hash_slot("{user1000}.following"), hash_slot("user1000"));
        // An empty tag is no tag; only the first `{...}` counts.
        assert_eq!(hash_slot("foo{}bar"), crc16(b"foo{}bar") % 16384);
        assert_eq!(hash_slot("a{b}{c}"), hash_slot("b"));
        // A name and its derived keys share a slot.
        for name in ["orders:42", "jobs", "x{tag}y"] {
            assert_eq!(
                hash_slot(name),
                hash_slot(&prefixed("redisson_lock_token", name))
            );
            assert_eq!(hash_slot(name), hash_slot(&suffixed(name, "intent")));
        }
    }

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
