//! Owners: who holds a lock, in the protocol's `<client-id>:<n>` form.
//!
//! By default the owner is the current Tokio task: the same task re-enters a lock it holds,
//! another task of the same client waits, as two Java threads do with Redisson. Code outside
//! any task (the future given to `block_on`) is owned per thread. Code that hands a hold from
//! one task to another uses an explicit [`Owner`] from [`Client::new_owner`](crate::Client::new_owner).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Owner numbers that are not Tokio task ids start here, so the two never collide.
const NON_TASK_BASE: u64 = 1 << 53;
static NEXT_NON_TASK: AtomicU64 = AtomicU64::new(NON_TASK_BASE);

thread_local! {
    static THREAD_OWNER: u64 = NEXT_NON_TASK.fetch_add(1, Ordering::Relaxed);
    /// The last owner made on this thread, by task and client id: a task making many calls
    /// formats its owner once.
    static LAST_OWNER: std::cell::RefCell<Option<(Option<tokio::task::Id>, usize, Owner)>> =
        const { std::cell::RefCell::new(None) };
}

/// The identity a hold is recorded under: `<client-id>:<n>`.
///
/// Cheap to clone. One owner should be used by one task at a time: two tasks acquiring with the
/// same owner at once share one reentrant hold.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Owner(Arc<str>);

impl Owner {
    /// The owner of the calling task (or thread, outside any task) for client `client_id`.
    pub(crate) fn current(client_id: &str) -> Self {
        let task = tokio::task::try_id();
        // The client id string lives as long as its client; its address tells clients apart.
        let client = client_id.as_ptr() as usize;
        let cached = LAST_OWNER.with(|last| {
            last.borrow()
                .as_ref()
                .filter(|(t, c, owner)| {
                    *t == task && *c == client && owner.0.starts_with(client_id)
                })
                .map(|(_, _, owner)| owner.clone())
        });
        if let Some(owner) = cached {
            return owner;
        }
        let owner = match task {
            Some(id) => Self::compose(client_id, id),
            None => Self::compose(client_id, THREAD_OWNER.with(|n| *n)),
        };
        LAST_OWNER.with(|last| *last.borrow_mut() = Some((task, client, owner.clone())));
        owner
    }

    /// A fresh owner, distinct from every task's and every other explicit owner's.
    pub(crate) fn fresh(client_id: &str) -> Self {
        Self::compose(client_id, NEXT_NON_TASK.fetch_add(1, Ordering::Relaxed))
    }

    /// `<client-id>:<n>`, formatted on the stack: one allocation, the shared string's.
    fn compose(client_id: &str, n: impl fmt::Display) -> Self {
        use std::io::Write;
        let mut buf = [0u8; 128];
        let mut cursor = std::io::Cursor::new(&mut buf[..]);
        let written = write!(cursor, "{client_id}:{n}").is_ok();
        let len = usize::try_from(cursor.position()).unwrap_or(0);
        match buf.get(..len).map(std::str::from_utf8) {
            Some(Ok(text)) if written => Self(Arc::from(text)),
            // Longer than the buffer (not a client id of ours): the plain way.
            _ => Self(format!("{client_id}:{n}").into()),
        }
    }

    /// The owner as written into Redis.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The owner as a shared string, for tables keyed by owner (cloning it copies nothing).
    pub fn as_shared(&self) -> &Arc<str> {
        &self.0
    }

    /// The writer form used by read-write locks: `<owner>:write`.
    pub fn writer(&self) -> String {
        format!("{}:write", self.0)
    }
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

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tasks_have_distinct_owners_and_a_task_keeps_its_own() {
        let a = tokio::spawn(async { (Owner::current("c"), Owner::current("c")) });
        let b = tokio::spawn(async { Owner::current("c") });
        let (a1, a2) = a.await.expect("task a");
        let b = b.await.expect("task b");
        assert_eq!(a1, a2);
        assert_ne!(a1, b);
        assert!(a1.as_str().starts_with("c:"));
        assert_ne!(Owner::fresh("c"), Owner::fresh("c"));
        assert_eq!(Owner::fresh("c").writer().rsplit(':').next(), Some("write"));
    }
}
