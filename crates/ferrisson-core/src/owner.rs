//! Owners: who holds what, in the protocol's `<client-id>:<n>` form (Redisson's
//! `uuid:threadId`).
//!
//! # The rule
//!
//! **A handle with no owner of its own takes every hold under a fresh owner.** Two acquire
//! futures can never share a hold by accident, wherever they run: joined in one task
//! (`join!`, `FuturesUnordered`, `buffer_unordered`), in two tasks, or on two threads, they
//! exclude each other exactly as two processes do (as `tokio::sync::Mutex` guards do). An
//! implicit owner per Tokio task, as Redisson's per thread, would let two futures joined in
//! one task both "re-enter" the lock and run their critical sections together.
//!
//! **Re-entry is explicit.** A handle bound to an owner ([`Client::new_owner`], or the owner
//! of a guard, [`HoldGuard::owner`](crate::HoldGuard::owner)) through the synchronizer's
//! `owned_by` acquires as that owner: the same owner acquiring again re-enters and counts
//! holds, from any task. Code that binds one owner to two concurrent futures has chosen to
//! share the hold.
//!
//! [`Client::new_owner`]: crate::Client::new_owner

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};

/// Owner numbers, one per owner this process makes (every client's share one sequence).
static NEXT_OWNER: AtomicU64 = AtomicU64::new(1);

/// The identity a hold is recorded under: `<client-id>:<n>`.
///
/// Cheap to clone. One owner should be used by one task at a time: two tasks acquiring with the
/// same owner at once share one reentrant hold.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Owner(Arc<str>);

impl Owner {
    /// The owner a query about "this handle's holds" asks about: the bound one.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a handle with no owner of its own, whose holds belong
    /// each to its own guard.
    pub(crate) fn for_query<'a>(bound: Option<&'a Owner>, query: &str) -> Result<&'a Owner> {
        bound.ok_or_else(|| {
            Error::InvalidArgument(format!(
                "`{query}` asks about this handle's owner, and it has none: each acquire takes \
                 a fresh owner; bind one with `owned_by` (for example a guard's `owner()`)"
            ))
        })
    }

    /// A fresh owner, distinct from every other owner.
    pub(crate) fn fresh(client_id: &str) -> Self {
        Self::compose(client_id, NEXT_OWNER.fetch_add(1, Ordering::Relaxed))
    }

    /// `<client-id>:<n>`, written on the stack: one allocation, the shared string's (an owner
    /// is made for every acquisition of a handle with no owner of its own: no formatting
    /// machinery here).
    pub(crate) fn compose(client_id: &str, n: u64) -> Self {
        let mut digits = [0u8; 20];
        let digits = decimal(n, &mut digits);
        let mut text = String::with_capacity(client_id.len() + 1 + digits.len());
        text.push_str(client_id);
        text.push(':');
        text.push_str(digits);
        Self(Arc::from(text))
    }

    /// The owner as written into Redis.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The owner as a shared string, for tables keyed by owner (cloning it copies nothing).
    pub fn as_shared(&self) -> &Arc<str> {
        &self.0
    }
}

/// `n` in decimal, written at the end of `buf`.
fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &str {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    std::str::from_utf8(&buf[at..]).unwrap_or_default()
}

impl fmt::Debug for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Owner").field(&&*self.0).finish()
    }
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_owners_are_distinct_numbers_of_their_client() {
        let (a, b) = (Owner::fresh("c"), Owner::fresh("c"));
        assert_ne!(a, b);
        assert!(a.as_str().starts_with("c:"));
        assert_eq!(
            a.as_str()
                .split(':')
                .nth(1)
                .map(|n| n.parse::<u64>().is_ok()),
            Some(true)
        );
        let mut buf = [0u8; 20];
        assert_eq!(decimal(0, &mut buf), "0");
        assert_eq!(decimal(u64::MAX, &mut buf), u64::MAX.to_string());
    }

    #[test]
    fn a_query_needs_a_bound_owner() {
        let owner = Owner::fresh("c");
        assert_eq!(
            Owner::for_query(Some(&owner), "hold_count").ok(),
            Some(&owner)
        );
        assert!(matches!(
            Owner::for_query(None, "hold_count"),
            Err(Error::InvalidArgument(_))
        ));
    }
}
