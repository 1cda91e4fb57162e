//! A waiter reserved by a releaser for a hand-off.

use super::*;

/// A waiter that takes a `P`, reserved by a releaser for a hand-off. Dropped without
/// [`deliver`](Self::deliver), it frees the waiter and wakes it to try again.
pub struct Claim<P> {
    pub(super) shared: Arc<HubShared>,
    pub(super) channel: String,
    pub(super) slot: Arc<Slot>,
    pub(super) need: Need,
    pub(super) settled: bool,
    pub(super) hands: PhantomData<fn(P)>,
}

impl<P> std::fmt::Debug for Claim<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Claim")
            .field("channel", &self.channel)
            .field("need", &self.need)
            .finish_non_exhaustive()
    }
}

impl<P: Send + 'static> Claim<P> {
    /// What the waiter needs.
    pub fn need(&self) -> &Need {
        &self.need
    }

    /// Hands `payload` to the waiter. If the waiter has left meanwhile, the payload comes
    /// back, and the caller must undo what it stands for.
    ///
    /// # Errors
    ///
    /// The payload, when the waiter is gone.
    pub fn deliver(mut self, payload: P) -> Result<(), P> {
        self.settled = true;
        let state = self.shared.state();
        let present = state
            .channels
            .get(&self.channel)
            .is_some_and(|c| c.slots.iter().any(|s| Arc::ptr_eq(s, &self.slot)));
        if !present {
            return Err(payload);
        }
        *self.slot.handoff.lock().unwrap_or_else(|e| e.into_inner()) = Some(Box::new(payload));
        self.slot.claimed.store(false, Ordering::Release);
        drop(state);
        self.slot.notify.notify_one();
        Ok(())
    }
}

impl<P> Drop for Claim<P> {
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
