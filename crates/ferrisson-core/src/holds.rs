//! What the client holds through live guards and permits, so that [`Client::shutdown`] can
//! give back what their owners did not: each guard of a hold (every lock kind, an expirable
//! permit) and each plain semaphore's `Permits` registers here while it lives, with how to
//! give it back. Whoever comes first gives it back, once: the guard (unlock, release, drop)
//! or the shutdown.
//!
//! [`Client::shutdown`]: crate::Client::shutdown

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use futures::future::BoxFuture;

use crate::error::Result;

/// How a live hold is given back by a shutdown its owner did not wait for.
pub trait GiveBack: Send + Sync + 'static {
    /// What it is, for the shutdown's report: the kind and the key (`lock \`orders\``).
    fn what(&self) -> String;

    /// Gives it back (releases the hold, returns the permits): `Ok(false)` when Redis no
    /// longer had it.
    fn give_back(self: Arc<Self>) -> BoxFuture<'static, Result<bool>>;

    /// What it holds, for the waits on record of the task that took it (`crate::waits`):
    /// `None` (the default) keeps it out of them.
    fn held(&self) -> Option<Held> {
        None
    }
}

/// What a live hold holds, as a waiting task's record lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// The kind as its metrics name it (`lock`, `semaphore`, …).
    pub kind: &'static str,
    /// The object's key.
    pub key: String,
    /// The owner the hold is under (a lock kind; `None` for permits).
    pub owner: Option<String>,
    /// Permits held (0 for a lock hold).
    pub permits: u64,
}

struct Entry {
    claimed: Arc<AtomicBool>,
    give: Arc<dyn GiveBack>,
    /// The task that took it (`crate::waits`).
    task: crate::waits::Task,
}

/// The client's live holds.
#[derive(Default)]
pub(crate) struct Holds {
    next: AtomicU64,
    live: Mutex<HashMap<u64, Entry>>,
    /// Told each time a hold leaves the registry (a shutdown waits for it to empty).
    left: tokio::sync::Notify,
}

impl Holds {
    fn live(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Entry>> {
        // A panic while the map is locked leaves it whole: poisoning is ignored.
        self.live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Registers a live hold; the ticket goes with its guard.
    pub(crate) fn register(self: &Arc<Self>, give: Arc<dyn GiveBack>) -> HoldTicket {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let claimed = Arc::new(AtomicBool::new(false));
        self.live().insert(
            id,
            Entry {
                claimed: claimed.clone(),
                give,
                task: crate::waits::current_task(),
            },
        );
        HoldTicket {
            holds: Arc::downgrade(self),
            id,
            claimed,
        }
    }

    /// How many holds are live.
    pub(crate) fn count(&self) -> usize {
        self.live().len()
    }

    /// Waits until no hold is live.
    pub(crate) async fn emptied(&self) {
        loop {
            let left = self.left.notified();
            if self.count() == 0 {
                return;
            }
            left.await;
        }
    }

    /// What the live holds hold, by the task that took them, for the waits on record of the
    /// tasks in `of`.
    pub(crate) fn by_task(
        &self,
        of: &std::collections::HashSet<crate::waits::Task>,
    ) -> HashMap<crate::waits::Task, Vec<Held>> {
        let mut out: HashMap<crate::waits::Task, Vec<Held>> = HashMap::new();
        for e in self.live().values() {
            if of.contains(&e.task)
                && !e.claimed.load(Ordering::Relaxed)
                && let Some(held) = e.give.held()
            {
                out.entry(e.task).or_default().push(held);
            }
        }
        out
    }

    /// Takes every live hold that its guard has not claimed yet, for the caller to give back.
    pub(crate) fn take_all(&self) -> Vec<Arc<dyn GiveBack>> {
        let entries: Vec<Entry> = self.live().drain().map(|(_, e)| e).collect();
        self.left.notify_waiters();
        entries
            .into_iter()
            .filter(|e| !e.claimed.swap(true, Ordering::AcqRel))
            .map(|e| e.give)
            .collect()
    }

    fn remove(&self, id: u64) {
        if self.live().remove(&id).is_some() {
            self.left.notify_waiters();
        }
    }
}

/// A guard's registration as a live hold ([`ClientEngine::register_hold`]). The guard
/// [`claim`](Self::claim)s it before it gives the hold back itself; dropping the ticket
/// unregisters it.
///
/// [`ClientEngine::register_hold`]: crate::__engine::ClientEngine::register_hold
pub struct HoldTicket {
    holds: Weak<Holds>,
    id: u64,
    claimed: Arc<AtomicBool>,
}

impl std::fmt::Debug for HoldTicket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HoldTicket")
            .field("id", &self.id)
            .field("claimed", &self.claimed.load(Ordering::Relaxed))
            .finish()
    }
}

impl HoldTicket {
    /// Claims the hold for its guard, which then gives it back itself: `false` when a shutdown
    /// has given it back already (the guard then has nothing to release).
    pub fn claim(&self) -> bool {
        let first = !self.claimed.swap(true, Ordering::AcqRel);
        if let Some(holds) = self.holds.upgrade() {
            holds.remove(self.id);
        }
        first
    }

    /// Whether a shutdown has given the hold back (or the guard claimed it).
    pub fn is_claimed(&self) -> bool {
        self.claimed.load(Ordering::Acquire)
    }
}

impl Drop for HoldTicket {
    fn drop(&mut self) {
        if let Some(holds) = self.holds.upgrade() {
            holds.remove(self.id);
        }
    }
}
