//! A gate's queue of acquisitions waiting for a hand-off: a RedLock's unlock passes the lock
//! straight to the oldest, at most a streak of them in a row. Its source is built twice: on
//! std's locks for the library, and on shuttle's for the model checks (`model_check`), which
//! run a hand-off against a waiter that leaves, a short hand-off put back against a waiter
//! that joins, and the streak.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

// The parent module decides whose: std's, or shuttle's under the model checks.
use super::queue_sync::{AtomicU32, AtomicU64, Mutex, MutexGuard};

/// The acquisitions waiting for a hand-off of a `P`, oldest first, and the hand-offs made in a
/// row since the lock was last freed for everyone.
pub(crate) struct Queue<P> {
    waiting: Mutex<VecDeque<Waiter<P>>>,
    streak: AtomicU32,
    next_id: AtomicU64,
}

impl<P> std::fmt::Debug for Queue<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("waiting", &self.waiting().len())
            .field("streak", &self.streak.load(Ordering::Relaxed))
            .finish()
    }
}

/// An acquisition waiting for a hand-off: the lease it asked for, and where its `P` goes.
#[derive(Debug)]
pub(crate) struct Waiter<P> {
    pub(crate) id: u64,
    pub(crate) lease: Option<Duration>,
    tx: tokio::sync::oneshot::Sender<P>,
}

impl<P> Waiter<P> {
    /// Hands the waiter `handed`; it comes back when the waiter has gone.
    ///
    /// # Errors
    ///
    /// `handed`, when the waiter has gone.
    pub(crate) fn deliver(self, handed: P) -> Result<(), P> {
        self.tx.send(handed)
    }
}

/// A waiter's place in the queue: leaving it (dropped) takes the waiter out.
pub(crate) struct Place<P> {
    queue: Arc<Queue<P>>,
    id: u64,
}

impl<P> Drop for Place<P> {
    fn drop(&mut self) {
        self.queue.waiting().retain(|w| w.id != self.id);
    }
}

impl<P> Queue<P> {
    pub(crate) fn new() -> Self {
        Self {
            waiting: Mutex::new(VecDeque::new()),
            streak: AtomicU32::new(0),
            next_id: AtomicU64::new(1),
        }
    }

    fn waiting(&self) -> MutexGuard<'_, VecDeque<Waiter<P>>> {
        self.waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues a waiter with `lease`, last: its place (which takes it out when dropped) and
    /// where its hand-off arrives.
    pub(crate) fn join(
        self: &Arc<Self>,
        lease: Option<Duration>,
    ) -> (Place<P>, tokio::sync::oneshot::Receiver<P>) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.waiting().push_back(Waiter { id, lease, tx });
        (
            Place {
                queue: self.clone(),
                id,
            },
            rx,
        )
    }

    /// Whether acquisitions wait (for a hand-off or their turn).
    pub(crate) fn has_waiters(&self) -> bool {
        self.waiting().iter().any(|w| !w.tx.is_closed())
    }

    /// The oldest waiter still waiting, out of the queue, when the streak allows another
    /// hand-off (fewer than `max_streak` in a row); else the streak starts over and the
    /// caller frees the lock for everyone.
    pub(crate) fn next(&self, max_streak: u32) -> Option<Waiter<P>> {
        let mut waiting = self.waiting();
        waiting.retain(|w| !w.tx.is_closed());
        if waiting.is_empty() {
            self.streak.store(0, Ordering::Relaxed);
            return None;
        }
        if self.streak.fetch_add(1, Ordering::Relaxed) >= max_streak {
            self.streak.store(0, Ordering::Relaxed);
            return None;
        }
        waiting.pop_front()
    }

    /// Puts a waiter the hand-off fell short for back at the head of the queue, its place
    /// kept (a waiter that left meanwhile is skipped by the next [`next`](Self::next)).
    pub(crate) fn put_back(&self, waiter: Waiter<P>) {
        self.waiting().push_front(waiter);
    }
}
