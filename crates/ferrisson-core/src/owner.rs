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
            Some(id) => Self::compose(client_id, task_number(id)),
            None => Self::compose(client_id, THREAD_OWNER.with(|n| *n)),
        };
        LAST_OWNER.with(|last| *last.borrow_mut() = Some((task, client, owner.clone())));
        owner
    }

    /// A fresh owner, distinct from every task's and every other explicit owner's.
    pub(crate) fn fresh(client_id: &str) -> Self {
        Self::compose(client_id, NEXT_NON_TASK.fetch_add(1, Ordering::Relaxed))
    }

    /// `<client-id>:<n>`, written on the stack: one allocation, the shared string's. (Owners
    /// are made on every acquisition by a task that is not the thread's last one: no
    /// formatting machinery here.)
    fn compose(client_id: &str, n: u64) -> Self {
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

    /// The writer form used by read-write locks: `<owner>:write`.
    pub fn writer(&self) -> String {
        format!("{}:write", self.0)
    }
}

/// The number of a task id, the one its `Display` writes, read without formatting: a task id
/// hashes as its one `u64`, which this hasher keeps. (Should a tokio release hash it otherwise,
/// the bytes are folded instead: still one number per task, as owners need.)
fn task_number(id: tokio::task::Id) -> u64 {
    use std::hash::{Hash, Hasher};
    struct Keep(u64);
    impl Hasher for Keep {
        fn finish(&self) -> u64 {
            self.0
        }
        fn write(&mut self, bytes: &[u8]) {
            for byte in bytes {
                self.0 = self.0.rotate_left(8) ^ u64::from(*byte);
            }
        }
        fn write_u64(&mut self, n: u64) {
            self.0 = n;
        }
    }
    let mut keep = Keep(0);
    id.hash(&mut keep);
    keep.finish()
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

    #[tokio::test]
    async fn a_task_owner_carries_the_task_id_as_tokio_displays_it() {
        let (owner, id) = tokio::spawn(async { (Owner::current("c"), tokio::task::id()) })
            .await
            .expect("task");
        assert_eq!(owner.as_str(), format!("c:{id}"));
        let mut buf = [0u8; 20];
        assert_eq!(decimal(0, &mut buf), "0");
        assert_eq!(decimal(u64::MAX, &mut buf), u64::MAX.to_string());
        assert_eq!(
            Owner::fresh("c")
                .as_str()
                .split(':')
                .nth(1)
                .map(|n| n.parse::<u64>().is_ok()),
            Some(true)
        );
    }
}
