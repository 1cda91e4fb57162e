//! A waiter's slot, and a channel's waiters: who a message wakes.

use super::*;

pub(super) struct Slot {
    pub(super) pending: AtomicBool,
    /// The pending wake-up is a deferred one ([`Woken::Deferred`]).
    pub(super) deferred: AtomicBool,
    /// The waiter waits out its deferral ([`Subscription::wait_fallback`]).
    pub(super) in_fallback: AtomicBool,
    /// The pending wake-up says another client took the lock ([`Woken::Taken`]).
    pub(super) taken: AtomicBool,
    /// The waiter's last try found nothing for it, and it has not been served since: a caller
    /// that wants no more than it may queue behind it without a try
    /// ([`Hub::subscribe_behind`]).
    pub(super) failed: AtomicBool,
    pub(super) notify: Notify,
    /// What the waiter tells a releaser that may hand it what it waits for (`None`: no
    /// hand-offs).
    pub(super) need: Option<Need>,
    /// Reserved by a releaser for a hand-off (guarded by the hub's lock).
    pub(super) claimed: AtomicBool,
    /// The waiter is trying right now (guarded by the hub's lock): it cannot be claimed, or
    /// its own try and a hand-off could both give it the synchronizer.
    pub(super) busy: AtomicBool,
    /// The waiter is asleep in [`Subscription::wait`]: it tries again only when woken, handed
    /// what it waits for, or at its bound ([`Hub::parked`]).
    pub(super) parked: AtomicBool,
    pub(super) handoff: Mutex<Option<Grant>>,
    /// An observer ([`Hub::observe`]): woken by every message and reconnect, beside the
    /// waiters and never in their place. It waits for nothing: it is never claimed, never
    /// counted among the waiters a message wakes, and nobody queues behind it.
    pub(super) observer: bool,
    /// What the waiter waits for, as bits a [`Wake::Matching`] message is matched against
    /// (all bits: any release may be for it).
    pub(super) interest: AtomicU64,
}

impl Slot {
    /// Marks the slot woken; false if it was already.
    pub(super) fn wake(&self) -> bool {
        if self.pending.swap(true, Ordering::AcqRel) {
            return false;
        }
        self.notify.notify_one();
        true
    }

    /// Consumes a stored notification, if any, without waiting.
    pub(super) fn forget_notification(&self) {
        use futures::FutureExt;
        let _ = self.notify.notified().now_or_never();
    }

    pub(super) fn take_handoff(&self) -> Option<Grant> {
        self.handoff
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }
}

pub(super) struct Channel {
    /// The channel's name, shared with its waiters' subscriptions (one allocation per
    /// channel, not one per waiter).
    pub(super) name: Arc<str>,
    pub(super) slots: VecDeque<Arc<Slot>>,
    /// How many of the slots are observers: a message's wake-up looks for them only when
    /// there are some.
    pub(super) observers: usize,
    pub(super) policy: WakePolicy,
    /// The connection epoch in which the server confirmed the subscription (0: not yet).
    pub(super) confirmed_epoch: u64,
    /// Hand-offs since the last public message on the channel.
    pub(super) streak: u32,
    /// Lock releases (`Wake::One` messages) still to let pass after the client's turn: they
    /// wake the head waiter deferred, so that the other clients' waiters take the lock first.
    /// While the turn-ending release is in flight it is 1 until its own message has been seen.
    pub(super) skips: u32,
    /// The client's turn-ending release is in flight ([`Hub::claim_turn`] to [`Hub::end_turn`]).
    pub(super) turn_ending: bool,
    /// A local channel ([`Hub::subscribe_local`]): never subscribed on the server, its
    /// waiters are served by this process's hand-offs alone.
    pub(super) local: bool,
    /// The key whose tracked changes wake the channel's waiters as a release message would
    /// ([`Subscription::track`]; `HubState::tracked` maps it back).
    pub(super) tracked: Option<Vec<u8>>,
}

impl Channel {
    pub(super) fn new(name: &str, policy: WakePolicy, confirmed_epoch: u64) -> Self {
        Self {
            name: name.into(),
            slots: VecDeque::new(),
            observers: 0,
            policy,
            confirmed_epoch,
            streak: 0,
            skips: 0,
            turn_ending: false,
            local: false,
            tracked: None,
        }
    }

    /// Wakes as `wake` says. A waiter woken deferred that has not looked yet is woken for
    /// real instead (it counts as one).
    pub(super) fn wake(&self, wake: Wake) -> usize {
        let (limit, mask) = match wake {
            Wake::None => (0, u64::MAX),
            Wake::One => (1, u64::MAX),
            Wake::UpTo(n) => (n, u64::MAX),
            Wake::All => (usize::MAX, u64::MAX),
            Wake::Matching(mask) => (usize::MAX, mask),
        };
        self.wake_observers();
        let mut woken = 0;
        let wanted = |s: &&Arc<Slot>| !s.observer && s.interest.load(Ordering::Relaxed) & mask != 0;
        for slot in self.slots.iter().filter(wanted) {
            if woken >= limit {
                break;
            }
            if slot.claimed.load(Ordering::Acquire) {
                continue;
            }
            if slot.deferred.swap(false, Ordering::AcqRel) {
                // Woken deferred: now it is woken for real. (If it has just taken the
                // deferred wake-up, the notification stored here ends its deferral at once.)
                slot.notify.notify_one();
                woken += 1;
            } else if slot.taken.swap(false, Ordering::AcqRel) {
                // Told the lock was taken, and not yet looked: this release is for real (its
                // wake-up is pending already).
                slot.notify.notify_one();
                woken += 1;
            } else if slot.wake() {
                woken += 1;
            }
        }
        woken
    }

    /// Wakes every observer (each message and reconnect reaches them all).
    pub(super) fn wake_observers(&self) {
        if self.observers > 0 {
            for slot in self.slots.iter().filter(|s| s.observer) {
                slot.wake();
            }
        }
    }

    /// A lock release the client lets pass: wakes the longest-waiting waiter deferred
    /// (unless one is woken already), so that it tries only if no other client's waiter takes
    /// the lock within [`TURN_FALLBACK`].
    pub(super) fn wake_deferred(&self) {
        self.wake_observers();
        let Some(slot) = self
            .slots
            .iter()
            .find(|s| !s.observer && !s.claimed.load(Ordering::Acquire))
        else {
            return;
        };
        if slot.pending.load(Ordering::Acquire) {
            return;
        }
        slot.deferred.store(true, Ordering::Release);
        slot.wake();
    }

    /// Another client's waiter took the lock that a release this client let pass freed
    /// ([`TAKEN_MESSAGE`]): the waiters woken deferred for it need not try at their fallback.
    /// A deferred wake-up not taken yet is withdrawn; a waiter in its fallback wait is told
    /// ([`Woken::Taken`]). Waiters woken for real, and observers, are left alone.
    pub(super) fn taken(&self) {
        for slot in self.slots.iter().filter(|s| !s.observer) {
            if slot.deferred.swap(false, Ordering::AcqRel) {
                slot.pending.store(false, Ordering::Release);
                slot.forget_notification();
            } else if slot.in_fallback.load(Ordering::Acquire)
                && !slot.pending.load(Ordering::Acquire)
            {
                slot.taken.store(true, Ordering::Release);
                slot.wake();
            }
        }
    }
}

pub(super) fn new_slot(need: Option<Need>) -> Arc<Slot> {
    slot(need, false)
}

pub(super) fn slot(need: Option<Need>, observer: bool) -> Arc<Slot> {
    Arc::new(Slot {
        pending: AtomicBool::new(false),
        deferred: AtomicBool::new(false),
        in_fallback: AtomicBool::new(false),
        taken: AtomicBool::new(false),
        failed: AtomicBool::new(false),
        notify: Notify::new(),
        need,
        claimed: AtomicBool::new(false),
        busy: AtomicBool::new(false),
        parked: AtomicBool::new(false),
        handoff: Mutex::new(None),
        observer,
        interest: AtomicU64::new(u64::MAX),
    })
}
