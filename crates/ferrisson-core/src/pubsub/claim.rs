//! A waiter reserved by a releaser for a hand-off.

use super::*;

/// A waiter reserved by a releaser for a hand-off of what it takes (its [`Need::takes`]).
/// Dropped without [`deliver`](Self::deliver), it frees the waiter and wakes it to try again.
pub struct Claim {
    pub(super) shared: Arc<HubShared>,
    pub(super) channel: String,
    pub(super) slot: Arc<Slot>,
    pub(super) need: Need,
    pub(super) settled: bool,
}

impl std::fmt::Debug for Claim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Claim")
            .field("channel", &self.channel)
            .field("need", &self.need)
            .finish_non_exhaustive()
    }
}

impl Claim {
    /// What the waiter needs.
    pub fn need(&self) -> &Need {
        &self.need
    }

    /// Hands `grant` to the waiter. If the waiter has left meanwhile, the grant comes back
    /// (dropped, it undoes itself). A grant of something else than the waiter takes is not
    /// delivered either: it comes back, and the waiter is woken to try again.
    ///
    /// # Errors
    ///
    /// The grant, when the waiter is gone or takes something else.
    pub fn deliver(mut self, grant: Grant) -> Result<(), Grant> {
        if grant.takes() != self.need.takes {
            // `Drop` frees the waiter and wakes it.
            return Err(grant);
        }
        self.settled = true;
        let state = self.shared.state();
        let present = state
            .channels
            .get(&self.channel)
            .is_some_and(|c| c.slots.iter().any(|s| Arc::ptr_eq(s, &self.slot)));
        if !present {
            return Err(grant);
        }
        *self.slot.handoff.lock().unwrap_or_else(|e| e.into_inner()) = Some(grant);
        self.slot.claimed.store(false, Ordering::Release);
        drop(state);
        self.slot.notify.notify_one();
        Ok(())
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        let _state = self.shared.state();
        self.slot.claimed.store(false, Ordering::Release);
        // A release message may have skipped it while it was claimed.
        self.slot.wake();
    }
}
