//! A waiter's registration on a channel ([`Subscription`]) and its tries.

use super::*;

/// One waiter's registration on a channel. Dropping it leaves the channel (and unsubscribes
/// the channel when it was the last local waiter).
pub struct Subscription {
    pub(super) shared: Arc<HubShared>,
    pub(super) channel: Arc<str>,
    pub(super) slot: Arc<Slot>,
    pub(super) satisfied: AtomicBool,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("channel", &self.channel)
            .field("pending", &self.slot.pending.load(Ordering::Relaxed))
            .finish()
    }
}

impl Subscription {
    /// Whether the server has confirmed the subscription on the live connection: from then on,
    /// no message published on the channel can be missed until the connection breaks.
    pub fn is_confirmed(&self) -> bool {
        let state = self.shared.state();
        state.connected
            && state
                .channels
                .get(&*self.channel)
                .is_some_and(|c| c.confirmed_epoch == state.epoch)
    }

    /// What the waiter waits for, as bits that a [`Wake::Matching`] message must share for it
    /// to wake (all bits, the default: any release may be for it). A message that came
    /// before this was set was matched against all bits: it woke the waiter.
    pub fn set_interest(&self, interest: u64) {
        self.slot.interest.store(interest, Ordering::Relaxed);
    }

    /// Makes an invalidation of `key` (a tracked read of it changed: [`ClientConfig::with_tracked_waits`](crate::ClientConfig::with_tracked_waits)) wake
    /// the channel's waiters as a release message on the channel would, for as long as the
    /// channel has waiters.
    pub fn track(&self, key: &str) {
        let mut state = self.shared.state();
        let Some(channel) = state.channels.get_mut(&*self.channel) else {
            return;
        };
        if channel.tracked.as_deref() == Some(key.as_bytes()) {
            return;
        }
        let name = channel.name.clone();
        let old = channel.tracked.replace(key.as_bytes().to_vec());
        if let Some(old) = old {
            state.tracked.remove(&old);
        }
        state.tracked.insert(key.as_bytes().to_vec(), name);
    }

    /// Marks the waiter as served (it got what it waited for), so that leaving the queue does
    /// not wake the next waiter. A waiter that leaves unserved (timed out, cancelled) from the
    /// head of the queue wakes the new head, which may have queued without a try of its own.
    pub fn satisfied(&self) {
        self.slot.failed.store(false, Ordering::Release);
        self.satisfied.store(true, Ordering::Release);
    }

    /// Marks the waiter's try as in vain (it found nothing for it): a caller that wants no
    /// more may queue behind it (`Hub::subscribe_behind`) until it is served.
    pub fn tried_in_vain(&self) {
        self.slot.failed.store(true, Ordering::Release);
    }

    /// Announces that the waiter is about to try (send its acquire). While the returned
    /// [`Trying`] lives, no releaser can claim it for a hand-off, so a try and a hand-off never
    /// both give it the synchronizer. If a releaser has claimed it already, the try must not
    /// happen: `Err(Some(handoff))` when the hand-off has arrived, `Err(None)` when it is on
    /// its way (wait for it: [`wait`](Self::wait) returns it, or a wake-up if it fails).
    ///
    /// # Errors
    ///
    /// As above: the waiter is claimed, or already handed the synchronizer.
    pub(crate) fn begin_try(&self) -> Result<Trying<'_>, Option<Grant>> {
        let _state = self.shared.state();
        if let Some(handoff) = self.slot.take_handoff() {
            self.slot.forget_notification();
            return Err(Some(handoff));
        }
        if self.slot.claimed.load(Ordering::Acquire) {
            return Err(None);
        }
        self.slot.busy.store(true, Ordering::Release);
        Ok(Trying { slot: &self.slot })
    }

    /// What a releaser handed this waiter, without announcing a try (a claim may still come):
    /// `Some(Some(grant))` when a hand-off has arrived (taken out here), `Some(None)` when one
    /// is on its way (a releaser has claimed the waiter), `None` when neither.
    pub(crate) fn handed_or_coming(&self) -> Option<Option<Grant>> {
        let _state = self.shared.state();
        if let Some(handoff) = self.slot.take_handoff() {
            self.slot.forget_notification();
            return Some(Some(handoff));
        }
        self.slot.claimed.load(Ordering::Acquire).then_some(None)
    }

    /// Waits up to `timeout` for [`is_confirmed`](Self::is_confirmed); returns whether it is.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only observes.
    pub async fn confirmed(&self, timeout: Duration) -> bool {
        let deadline = crate::time::later(Instant::now(), timeout);
        let mut changes = self.shared.confirmations.subscribe();
        loop {
            if self.is_confirmed() {
                return true;
            }
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => continue,
                _ => return self.is_confirmed(),
            }
        }
    }

    /// Waits until this waiter is woken by a message (or a reconnect), handed the
    /// synchronizer by a local releaser, or `bound` has passed. A wake-up or hand-off that
    /// arrived since the last wait returns at once.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a wake-up that arrives after the future is dropped stays pending for the
    /// next wait, or passes to another waiter when the subscription is dropped; a hand-off
    /// stays in the slot for the next wait, or is dropped with the subscription (which undoes
    /// it: the lock crate's hand-off is a guard, whose drop releases).
    pub(crate) async fn wait(&self, bound: Duration) -> Woken {
        if let Some(handoff) = self.slot.take_handoff() {
            self.slot.forget_notification();
            return Woken::Handed(handoff);
        }
        if let Some(woken) = self.take_wake_up() {
            // The wake-up that set the flag also stored a notification: used up here, so the
            // next wait does not return at once for nothing. (A wake-up racing in sets the flag
            // again, which the next wait sees.)
            self.slot.forget_notification();
            return woken;
        }
        let woken = {
            let _parked = Parked::new(&self.slot);
            tokio::time::timeout(bound, self.slot.notify.notified())
                .await
                .is_ok()
        };
        if let Some(handoff) = self.slot.take_handoff() {
            return Woken::Handed(handoff);
        }
        // Consume the flag whichever way the wait ended: the caller tries again now anyway.
        if self.slot.pending.swap(false, Ordering::AcqRel) || woken {
            self.woken()
        } else {
            Woken::TimedOut
        }
    }

    /// Takes a wake-up that arrived since the last wait, if any.
    pub(super) fn take_wake_up(&self) -> Option<Woken> {
        self.slot
            .pending
            .swap(false, Ordering::AcqRel)
            .then(|| self.woken())
    }

    /// A wake-up taken: deferred, a note that the lock was taken, or for real.
    pub(super) fn woken(&self) -> Woken {
        if self.slot.deferred.swap(false, Ordering::AcqRel) {
            Woken::Deferred
        } else if self.slot.taken.swap(false, Ordering::AcqRel) {
            Woken::Taken
        } else {
            Woken::Notified
        }
    }

    /// Whether another waiter of this client that may be handed what this one waits for is
    /// ahead of it in the channel's queue (observers aside).
    pub(crate) fn behind_others(&self) -> bool {
        let state = self.shared.state();
        state.channels.get(&*self.channel).is_some_and(|channel| {
            channel
                .slots
                .iter()
                .find(|s| !s.observer && s.need.is_some())
                .is_some_and(|head| !Arc::ptr_eq(head, &self.slot))
        })
    }

    /// [`wait`](Self::wait) after a [`Woken::Deferred`], up to `fallback`: ends early with
    /// [`Woken::Taken`] when another client's waiter takes the lock meanwhile.
    ///
    /// # Cancel safety
    ///
    /// As [`wait`](Self::wait)'s.
    pub(crate) async fn wait_fallback(&self, fallback: Duration) -> Woken {
        struct InFallback<'a>(&'a Slot);
        impl Drop for InFallback<'_> {
            fn drop(&mut self) {
                self.0.in_fallback.store(false, Ordering::Release);
            }
        }
        self.slot.in_fallback.store(true, Ordering::Release);
        let _in_fallback = InFallback(&self.slot);
        self.wait(fallback).await
    }
}

/// A waiter asleep in [`Subscription::wait`] (counted by [`Hub::parked`](super::Hub::parked));
/// dropping it, when the wait ends or its future is dropped, wakes it up.
struct Parked<'a>(&'a Slot);

impl<'a> Parked<'a> {
    fn new(slot: &'a Slot) -> Self {
        slot.parked.store(true, Ordering::Release);
        Self(slot)
    }
}

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        self.0.parked.store(false, Ordering::Release);
    }
}

/// A waiter's try in progress (see [`Subscription::begin_try`]); dropping it ends the try.
#[derive(Debug)]
pub struct Trying<'a> {
    pub(super) slot: &'a Slot,
}

impl Drop for Trying<'_> {
    fn drop(&mut self) {
        self.slot.busy.store(false, Ordering::Release);
    }
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot")
            .field("pending", &self.pending.load(Ordering::Relaxed))
            .field("claimed", &self.claimed.load(Ordering::Relaxed))
            .field("busy", &self.busy.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        crate::metrics::waiters(-1.0);
        let mut state = self.shared.state();
        let mut kick = false;
        if let Some(channel) = state.channels.get_mut(&*self.channel) {
            let was_head = channel
                .slots
                .front()
                .is_some_and(|s| Arc::ptr_eq(s, &self.slot));
            channel.slots.retain(|s| !Arc::ptr_eq(s, &self.slot));
            channel.observers = channel
                .observers
                .saturating_sub(usize::from(self.slot.observer));
            if !self.slot.observer
                && (self.slot.pending.load(Ordering::Acquire)
                    || (was_head && !self.satisfied.load(Ordering::Acquire)))
            {
                // The wake-up this waiter did not use belongs to the next one; and a head
                // leaving unserved passes the baton, so the queue never waits on nobody.
                channel.wake(Wake::One);
            }
            if channel.slots.is_empty() {
                if let Some(removed) = state.channels.remove(&*self.channel) {
                    if let Some(key) = &removed.tracked {
                        state.tracked.remove(key);
                    }
                    state.keep_turn(&self.channel, &removed);
                    if !removed.local {
                        crate::metrics::channels(-1.0);
                        kick = true;
                    }
                }
                self.shared.active.fetch_sub(1, Ordering::AcqRel);
            }
        }
        // A hand-off that arrived and was never taken is dropped here, outside the hub's
        // lock: dropping it undoes it (the lock crate's guard releases).
        let unused = self.slot.take_handoff();
        drop(state);
        drop(unused);
        if kick {
            self.shared.kick.notify_one();
        }
    }
}
