//! Waiters over pub/sub: one subscriber connection per client, shared by every waiter.
//!
//! # Implementation details
//!
//! A waiter (a task waiting for a lock, a permit, a latch) registers a *slot* on the channel
//! its synchronizer publishes on and gets a [`Subscription`]. The hub keeps, per channel, the
//! slots in arrival order and the channel's [`WakePolicy`], which turns a message's payload into
//! how many local waiters should try again (one for a lock release, all for a latch opening, up
//! to `n` for `n` released permits). A channel is subscribed while at least one slot is on it
//! and unsubscribed a moment (two seconds) after the last one leaves, so that a waiter coming
//! back soon finds it subscribed and confirmed; the desired set is reconciled with the connection
//! by one background task, the *driver*, which also owns the connection.
//!
//! Waking a slot sets its `pending` flag and stores a permit in its [`Notify`], so a wake-up
//! that arrives while the waiter is busy trying (not yet awaiting) is not lost: its next
//! [`Subscription::wait`] returns at once. A slot dropped with an unconsumed wake-up hands it to
//! the next slot of the channel, so a cancelled waiter never swallows the one wake-up a lock
//! release sends.
//!
//! **Local hand-off.** A holder releasing a lock that local waiters wait for can hand it to
//! the first of them in the release script itself, instead of freeing it and publishing: one
//! script call per acquisition instead of a release, a message and a try, and no wake-up race
//! with the other waiters. The releaser [`claims`](Hub::claim) the waiter (its slot carries a
//! [`Tag`] saying who it is), runs the release, and [`delivers`](Claim::deliver) the result
//! (the new guard) into the slot, where the waiter's [`Subscription::wait`] finds it. A waiter
//! that left in between is detected under the hub's lock, and the result is handed back to the
//! releaser, which releases it. To keep other clients from starving, a channel allows only a
//! bounded streak of hand-offs before the next release is a public one; any message seen on the
//! channel ends the streak.
//!
//! Messages can still be lost (a reconnect, a publisher on another connection failing). So
//! waiters never wait on a message alone: they subscribe, wait until the subscription is
//! confirmed, *then* try again (no lost wake-up between a failed try and the wait), and bound
//! every wait by the TTL the try returned. When the connection breaks, the driver reconnects
//! with backoff, resubscribes every channel in one command and wakes every waiter, because
//! anything may have happened while it was away. While nothing changes, Redis sees no command
//! from any waiter.

use std::any::Any;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use std::time::Duration;
use sync::{AtomicBool, AtomicUsize, Mutex, MutexGuard};

use futures::StreamExt;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use crate::config::RetryPolicy;

/// The hub's locks and flags: std's, or shuttle's under the model checks (feature
/// `model-check`), which then explore the interleavings of the threads that use them.
mod sync {
    #[cfg(feature = "model-check")]
    pub(super) use shuttle::sync::atomic::{AtomicBool, AtomicUsize};
    #[cfg(feature = "model-check")]
    pub(super) use shuttle::sync::{Mutex, MutexGuard};
    #[cfg(not(feature = "model-check"))]
    pub(super) use std::sync::atomic::{AtomicBool, AtomicUsize};
    #[cfg(not(feature = "model-check"))]
    pub(super) use std::sync::{Mutex, MutexGuard};
}

/// Hand-offs to local waiters in a row ([`Client::claim_waiter`](crate::engine::ClientEngine::claim_waiter))
/// before a release goes through Redis publicly, so that waiters of other clients (and
/// Redisson) get their turn. Every synchronizer that hands off locally uses this bound.
pub const MAX_HANDOFF_STREAK: u32 = 8;

/// How long a waiter woken by a release it lets pass ([`Woken::Deferred`]: its client just
/// had its turn) waits before it tries anyway, in case the client whose turn it is does not
/// take the lock (its waiters left, or it is Redisson's and took it already: then the try
/// finds the lock held and the waiter goes back to sleep).
pub const TURN_FALLBACK: Duration = Duration::from_millis(2);

/// The most releases a client lets pass after its turn, whatever number of other subscribers
/// its last release reached.
const MAX_TURN_SKIPS: u32 = 64;

/// How many local waiters a message wakes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// The message changes nothing for waiters.
    None,
    /// Wake the longest-waiting waiter that has not been woken yet (a lock release).
    One,
    /// Wake up to this many waiters (released permits).
    UpTo(usize),
    /// Wake every waiter (a latch opening, a write release of a read-write lock).
    All,
}

/// Turns the payload of a message into a [`Wake`]. One policy per channel.
pub type WakePolicy = fn(&[u8]) -> Wake;

/// The wake policy of Redisson's semaphore channels, whose messages are the permit count after
/// a release: wake up to that many waiters (none when it is not positive).
pub fn permits_message_policy(payload: &[u8]) -> Wake {
    let count = std::str::from_utf8(payload)
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok());
    match count {
        Some(n) if n > 0 => Wake::UpTo(usize::try_from(n).unwrap_or(usize::MAX)),
        Some(_) => Wake::None,
        // Not a count (another publisher): let everyone look.
        None => Wake::All,
    }
}

/// The wake policy of Redisson's lock channels: `0` (a lock released, or a read hold ended)
/// wakes one waiter; anything else (`1`: a write lock released, readers may all enter) wakes
/// every waiter.
pub fn lock_message_policy(payload: &[u8]) -> Wake {
    if payload == b"0" {
        Wake::One
    } else {
        Wake::All
    }
}

/// What a waiter says about itself to a releaser that may hand it the synchronizer
/// (the lock crate puts the waiter's owner and lease there).
pub type Tag = Arc<dyn Any + Send + Sync>;

/// What a releaser hands a waiter (the lock crate hands a guard).
pub type Handoff = Box<dyn Any + Send>;

/// How a [`Subscription::wait`] ended.
#[derive(Debug)]
pub enum Woken {
    /// A message (or a reconnect) says: try again.
    Notified,
    /// The bound passed without a wake-up.
    TimedOut,
    /// A local releaser handed this waiter the synchronizer.
    Handed(Handoff),
    /// A release the waiter's client lets pass: other clients' waiters take their turn first.
    /// The waiter waits again, up to [`TURN_FALLBACK`], and tries only if nothing else wakes it.
    Deferred,
}

struct Slot {
    pending: AtomicBool,
    /// The pending wake-up is a deferred one ([`Woken::Deferred`]).
    deferred: AtomicBool,
    /// The waiter's last try found nothing for it, and it has not been served since: a caller
    /// that wants no more than it may queue behind it without a try
    /// ([`Hub::subscribe_behind`]).
    failed: AtomicBool,
    notify: Notify,
    tag: Option<Tag>,
    /// Reserved by a releaser for a hand-off (guarded by the hub's lock).
    claimed: AtomicBool,
    /// The waiter is trying right now (guarded by the hub's lock): it cannot be claimed, or
    /// its own try and a hand-off could both give it the synchronizer.
    busy: AtomicBool,
    handoff: Mutex<Option<Handoff>>,
}

impl Slot {
    /// Marks the slot woken; false if it was already.
    fn wake(&self) -> bool {
        if self.pending.swap(true, Ordering::AcqRel) {
            return false;
        }
        self.notify.notify_one();
        true
    }

    /// Consumes a stored notification, if any, without waiting.
    fn forget_notification(&self) {
        use futures::FutureExt;
        let _ = self.notify.notified().now_or_never();
    }

    fn take_handoff(&self) -> Option<Handoff> {
        self.handoff
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }
}

struct Channel {
    /// The channel's name, shared with its waiters' subscriptions (one allocation per
    /// channel, not one per waiter).
    name: Arc<str>,
    slots: VecDeque<Arc<Slot>>,
    policy: WakePolicy,
    /// The connection epoch in which the server confirmed the subscription (0: not yet).
    confirmed_epoch: u64,
    /// Hand-offs since the last public message on the channel.
    streak: u32,
    /// Lock releases (`Wake::One` messages) still to let pass after the client's turn: they
    /// wake the head waiter deferred, so that the other clients' waiters take the lock first.
    /// While the turn-ending release is in flight it is 1 until its own message has been seen.
    skips: u32,
    /// The client's turn-ending release is in flight ([`Hub::claim_turn`] to [`Hub::end_turn`]).
    turn_ending: bool,
}

impl Channel {
    fn new(name: &str, policy: WakePolicy, confirmed_epoch: u64) -> Self {
        Self {
            name: name.into(),
            slots: VecDeque::new(),
            policy,
            confirmed_epoch,
            streak: 0,
            skips: 0,
            turn_ending: false,
        }
    }

    /// Wakes as `wake` says. A waiter woken deferred that has not looked yet is woken for
    /// real instead (it counts as one).
    fn wake(&self, wake: Wake) -> usize {
        let limit = match wake {
            Wake::None => 0,
            Wake::One => 1,
            Wake::UpTo(n) => n,
            Wake::All => usize::MAX,
        };
        let mut woken = 0;
        for slot in &self.slots {
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
            } else if slot.wake() {
                woken += 1;
            }
        }
        woken
    }

    /// A lock release the client lets pass: wakes the longest-waiting waiter deferred
    /// (unless one is woken already), so that it tries only if no other client's waiter takes
    /// the lock within [`TURN_FALLBACK`].
    fn wake_deferred(&self) {
        let Some(slot) = self
            .slots
            .iter()
            .find(|s| !s.claimed.load(Ordering::Acquire))
        else {
            return;
        };
        if slot.pending.load(Ordering::Acquire) {
            return;
        }
        slot.deferred.store(true, Ordering::Release);
        slot.wake();
    }
}

#[derive(Default)]
struct HubState {
    channels: HashMap<String, Channel>,
    /// Channels subscribed and confirmed on the current connection, with local waiters or
    /// lingering after the last one left (see [`Hub::subscribe_if_live`]).
    live: HashSet<String>,
    /// Incremented at each successful (re)connection.
    epoch: u64,
    connected: bool,
    closed: bool,
}

pub(crate) struct HubShared {
    state: Mutex<HubState>,
    /// How many channels have local waiters: lets the uncontended path skip the hub's lock.
    active: AtomicUsize,
    /// How many channels are live (`HubState::live`), for the same purpose.
    live: AtomicUsize,
    kick: Notify,
    confirmations: watch::Sender<u64>,
}

impl HubShared {
    /// A message arrived on `channel`: wake its waiters as the channel's policy says.
    fn message(&self, channel: &str, payload: &[u8]) {
        let mut state = self.state();
        if let Some(channel) = state.channels.get_mut(channel) {
            // Someone released publicly: the hand-off streak starts over.
            channel.streak = 0;
            let wake = (channel.policy)(payload);
            if wake == Wake::One && channel.skips > 0 {
                // The client had its turn: this release is another client's to take.
                channel.skips -= 1;
                channel.wake_deferred();
            } else {
                channel.wake(wake);
            }
        }
    }

    /// Wakes every waiter of every channel: after a reconnect, anything may have happened.
    fn wake_everyone(&self) {
        let mut state = self.state();
        for channel in state.channels.values_mut() {
            // No client's turn is known any more.
            channel.skips = 0;
            channel.turn_ending = false;
            channel.wake(Wake::All);
        }
    }

    fn state(&self) -> MutexGuard<'_, HubState> {
        // A panic while holding this lock cannot leave the state half-updated in a way that
        // matters more than stopping every waiter would, so poisoning is ignored.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The pub/sub side of a client: the shared subscriber connection and its waiters.
pub(crate) struct Hub {
    shared: Arc<HubShared>,
}

impl Hub {
    /// The hub's shared state, with no driver and no connection (unit tests of the
    /// claim/wake state machine).
    #[cfg(test)]
    fn detached() -> Self {
        Self {
            shared: Arc::new(HubShared {
                state: Mutex::new(HubState::default()),
                active: AtomicUsize::new(0),
                live: AtomicUsize::new(0),
                kick: Notify::new(),
                confirmations: watch::Sender::new(0),
            }),
        }
    }

    /// Starts the driver on the current Tokio runtime.
    pub(crate) fn start(
        source: Source,
        connect_timeout: Duration,
        response_timeout: Duration,
        retry: RetryPolicy,
    ) -> Self {
        let shared = Arc::new(HubShared {
            state: Mutex::new(HubState::default()),
            active: AtomicUsize::new(0),
            live: AtomicUsize::new(0),
            kick: Notify::new(),
            confirmations: watch::Sender::new(0),
        });
        let driver = Driver {
            shared: shared.clone(),
            source,
            connect_timeout,
            response_timeout,
            retry,
        };
        tokio::spawn(driver.run());
        Self { shared }
    }

    fn subscription(&self, channel: Arc<str>, slot: Arc<Slot>) -> Subscription {
        crate::metrics::waiters(1.0);
        Subscription {
            shared: self.shared.clone(),
            channel,
            slot,
            satisfied: AtomicBool::new(false),
        }
    }

    /// Registers a waiter on `channel`; the channel is subscribed if it was not.
    pub(crate) fn subscribe(
        &self,
        channel: &str,
        policy: WakePolicy,
        tag: Option<Tag>,
    ) -> Subscription {
        let slot = new_slot(tag);
        let mut state = self.shared.state();
        let mut kick = false;
        let entry = state.channels.entry(channel.to_owned()).or_insert_with(|| {
            kick = true;
            self.shared.active.fetch_add(1, Ordering::AcqRel);
            crate::metrics::channels(1.0);
            Channel::new(channel, policy, 0)
        });
        entry.slots.push_back(slot.clone());
        let name = entry.name.clone();
        drop(state);
        if kick {
            self.shared.kick.notify_one();
        }
        self.subscription(name, slot)
    }

    /// Registers a waiter on `channel` only if the channel is already subscribed and confirmed
    /// on the live connection, that is, other local waiters are on it: then no message
    /// published from now on can be missed, and the waiter can queue behind them without a
    /// try of its own (they are woken, or handed the lock, first; a head that leaves unserved
    /// wakes the next).
    pub(crate) fn subscribe_if_confirmed(
        &self,
        channel: &str,
        tag: impl FnOnce() -> Option<Tag>,
    ) -> Option<Subscription> {
        if self.shared.active.load(Ordering::Acquire) == 0 {
            return None;
        }
        self.register_confirmed(channel, None, None, tag)
    }

    /// Registers a waiter on `channel` only if the channel is subscribed and confirmed and a
    /// local waiter whose tag satisfies `behind` tried in vain and has not been served since
    /// (a waiter for as many permits as the caller, or fewer, found too few): the caller would
    /// fail too, and queues behind it without a try of its own. Every release from now on
    /// wakes it in its turn, and a waiter that takes permits and sees more left wakes the next
    /// ([`wake_local`](Self::wake_local)).
    pub(crate) fn subscribe_behind(
        &self,
        channel: &str,
        tag: impl FnOnce() -> Option<Tag>,
        behind: &dyn Fn(&Tag) -> bool,
    ) -> Option<Subscription> {
        if self.shared.active.load(Ordering::Acquire) == 0 {
            return None;
        }
        self.register_confirmed(channel, None, Some(behind), tag)
    }

    /// Wakes every waiter of every channel (the client shuts down: they look, and end).
    pub(crate) fn wake_all(&self) {
        self.shared.wake_everyone();
    }

    /// Wakes up to `n` local waiters of `channel` that are not woken yet (permits are left
    /// after a try took some: whoever queued behind the taker looks now).
    pub(crate) fn wake_local(&self, channel: &str, n: usize) {
        if n == 0 || self.shared.active.load(Ordering::Acquire) == 0 {
            return;
        }
        if let Some(entry) = self.shared.state().channels.get(channel) {
            entry.wake(Wake::UpTo(n));
        }
    }

    /// Registers a waiter on `channel` if the channel is subscribed and confirmed on the live
    /// connection: because other local waiters are on it, or because it still lingers after
    /// the last one left. Every message published from now on reaches the waiter, but nobody
    /// may be ahead of it: the caller must try before it sleeps.
    pub(crate) fn subscribe_if_live(
        &self,
        channel: &str,
        policy: WakePolicy,
        tag: impl FnOnce() -> Option<Tag>,
    ) -> Option<Subscription> {
        if self.shared.active.load(Ordering::Acquire) == 0
            && self.shared.live.load(Ordering::Acquire) == 0
        {
            return None;
        }
        self.register_confirmed(channel, Some(policy), None, tag)
    }

    /// The waiter's slot on a confirmed channel; with `lingering` (the policy of a channel
    /// taken back from lingering), also on a live channel nobody waits on.
    fn register_confirmed(
        &self,
        channel: &str,
        lingering: Option<WakePolicy>,
        behind: Option<&dyn Fn(&Tag) -> bool>,
        tag: impl FnOnce() -> Option<Tag>,
    ) -> Option<Subscription> {
        let mut state = self.shared.state();
        let epoch = state.epoch;
        if !state.connected {
            return None;
        }
        if let Some(policy) = lingering
            && !state.channels.contains_key(channel)
            && state.live.contains(channel)
        {
            // Still subscribed on this connection (the driver takes a channel out of `live`
            // before it unsubscribes it): waiters are back, nothing to send.
            self.shared.active.fetch_add(1, Ordering::AcqRel);
            crate::metrics::channels(1.0);
            state
                .channels
                .insert(channel.to_owned(), Channel::new(channel, policy, epoch));
        }
        let entry = state.channels.get_mut(channel)?;
        if entry.confirmed_epoch != epoch {
            return None;
        }
        if let Some(behind) = behind
            && !entry
                .slots
                .iter()
                .any(|s| s.failed.load(Ordering::Acquire) && s.tag.as_ref().is_some_and(behind))
        {
            return None;
        }
        let slot = new_slot(tag());
        entry.slots.push_back(slot.clone());
        let name = entry.name.clone();
        drop(state);
        Some(self.subscription(name, slot))
    }

    /// Reserves the longest-waiting tagged waiter of `channel` for a hand-off, unless the
    /// channel's hand-off streak has reached `max_streak` (then the streak restarts and the
    /// caller should release publicly).
    pub(crate) fn claim(&self, channel: &str, max_streak: u32) -> Option<Claim> {
        self.claim_or_yield(channel, max_streak, false)
    }

    /// As [`claim`](Self::claim), for a lock: when the streak has reached `max_streak` and
    /// local waiters wait, the client's turn ends. The caller releases publicly and reports
    /// how many subscribers its release message reached ([`end_turn`](Self::end_turn)); its
    /// own waiters let that message pass, and as many more as there are other clients
    /// subscribed, so that each of them gets a turn before this client's next (see
    /// "Turns between clients" in docs/architecture.md).
    pub(crate) fn claim_turn(&self, channel: &str, max_streak: u32) -> Option<Claim> {
        self.claim_or_yield(channel, max_streak, true)
    }

    fn claim_or_yield(&self, channel: &str, max_streak: u32, turns: bool) -> Option<Claim> {
        if self.shared.active.load(Ordering::Acquire) == 0 {
            return None;
        }
        let mut state = self.shared.state();
        let entry = state.channels.get_mut(channel)?;
        if entry.streak >= max_streak {
            entry.streak = 0;
            if turns && entry.slots.iter().any(|s| s.tag.is_some()) {
                // Its own release message is the first to let pass; how many more, the
                // release's reply says.
                entry.skips = 1;
                entry.turn_ending = true;
            }
            return None;
        }
        let slot = entry
            .slots
            .iter()
            .find(|s| {
                s.tag.is_some()
                    && !s.claimed.load(Ordering::Acquire)
                    && !s.busy.load(Ordering::Acquire)
                    && !s.pending.load(Ordering::Acquire)
            })?
            .clone();
        slot.claimed.store(true, Ordering::Release);
        entry.streak += 1;
        drop(state);
        Some(Claim {
            shared: self.shared.clone(),
            channel: channel.to_owned(),
            slot,
            settled: false,
        })
    }

    /// The turn-ending release of [`claim_turn`](Self::claim_turn) is done: its message
    /// reached `subscribers` subscriber connections (this client's among them; 0: it published
    /// nothing, or its outcome came from a retry). The client lets one release pass per other
    /// subscriber, its own included; with no other subscriber, nobody else is waiting, and its
    /// own waiter is woken for real.
    pub(crate) fn end_turn(&self, channel: &str, subscribers: u64) {
        let mut state = self.shared.state();
        let Some(entry) = state.channels.get_mut(channel) else {
            return;
        };
        if !std::mem::take(&mut entry.turn_ending) {
            // This release did not end a turn (it had nobody local to hand to).
            return;
        }
        let others = u32::try_from(subscribers.saturating_sub(1))
            .unwrap_or(u32::MAX)
            .min(MAX_TURN_SKIPS);
        // `skips` is 1 while the release's own message has not been seen, 0 once it has (and
        // was let pass): one release per other subscriber in all, the own one included.
        let own_seen = entry.skips == 0;
        entry.skips = (entry.skips + others).saturating_sub(1);
        if others == 0 && own_seen {
            // Nobody else waits, and the own message was let pass: wake the waiter for real.
            entry.wake(Wake::One);
        }
    }

    /// How many channels are subscribed (or about to be) and how many waiters wait on them.
    pub(crate) fn stats(&self) -> (usize, usize) {
        let state = self.shared.state();
        let waiters = state.channels.values().map(|c| c.slots.len()).sum();
        (state.channels.len(), waiters)
    }
}

fn new_slot(tag: Option<Tag>) -> Arc<Slot> {
    Arc::new(Slot {
        pending: AtomicBool::new(false),
        deferred: AtomicBool::new(false),
        failed: AtomicBool::new(false),
        notify: Notify::new(),
        tag,
        claimed: AtomicBool::new(false),
        busy: AtomicBool::new(false),
        handoff: Mutex::new(None),
    })
}

/// A waiter reserved by a releaser for a hand-off. Dropped without
/// [`deliver`](Self::deliver), it frees the waiter and wakes it to try again.
pub struct Claim {
    shared: Arc<HubShared>,
    channel: String,
    slot: Arc<Slot>,
    settled: bool,
}

impl std::fmt::Debug for Claim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Claim")
            .field("channel", &self.channel)
            .finish_non_exhaustive()
    }
}

impl Claim {
    /// What the waiter said about itself.
    pub fn tag(&self) -> Option<&Tag> {
        self.slot.tag.as_ref()
    }

    /// Hands `payload` to the waiter. If the waiter has left meanwhile, the payload comes
    /// back, and the caller must undo what it stands for.
    ///
    /// # Errors
    ///
    /// The payload, when the waiter is gone.
    pub fn deliver(mut self, payload: Handoff) -> Result<(), Handoff> {
        self.settled = true;
        let state = self.shared.state();
        let present = state
            .channels
            .get(&self.channel)
            .is_some_and(|c| c.slots.iter().any(|s| Arc::ptr_eq(s, &self.slot)));
        if !present {
            return Err(payload);
        }
        *self.slot.handoff.lock().unwrap_or_else(|e| e.into_inner()) = Some(payload);
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

impl Drop for Hub {
    fn drop(&mut self) {
        self.shared.state().closed = true;
        self.shared.kick.notify_one();
    }
}

/// One waiter's registration on a channel. Dropping it leaves the channel (and unsubscribes
/// the channel when it was the last local waiter).
pub struct Subscription {
    shared: Arc<HubShared>,
    channel: Arc<str>,
    slot: Arc<Slot>,
    satisfied: AtomicBool,
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
    /// The channel this subscription listens on.
    pub fn channel(&self) -> &str {
        &self.channel
    }

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

    /// Marks the waiter as served (it got what it waited for), so that leaving the queue does
    /// not wake the next waiter. A waiter that leaves unserved (timed out, cancelled) from the
    /// head of the queue wakes the new head, which may have queued without a try of its own.
    pub fn satisfied(&self) {
        self.slot.failed.store(false, Ordering::Release);
        self.satisfied.store(true, Ordering::Release);
    }

    /// Marks the waiter's try as in vain (it found nothing for it): a caller that wants no
    /// more may queue behind it (`ClientEngine::subscribe_behind`) until it is served.
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
    pub fn begin_try(&self) -> Result<Trying<'_>, Option<Handoff>> {
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

    /// Waits up to `timeout` for [`is_confirmed`](Self::is_confirmed); returns whether it is.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only observes.
    pub async fn confirmed(&self, timeout: Duration) -> bool {
        let deadline = crate::duration::later(Instant::now(), timeout);
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
    pub async fn wait(&self, bound: Duration) -> Woken {
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
        let woken = tokio::time::timeout(bound, self.slot.notify.notified())
            .await
            .is_ok();
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
    fn take_wake_up(&self) -> Option<Woken> {
        self.slot
            .pending
            .swap(false, Ordering::AcqRel)
            .then(|| self.woken())
    }

    /// A wake-up taken: deferred, or for real.
    fn woken(&self) -> Woken {
        if self.slot.deferred.swap(false, Ordering::AcqRel) {
            Woken::Deferred
        } else {
            Woken::Notified
        }
    }
}

/// A waiter's try in progress (see [`Subscription::begin_try`]); dropping it ends the try.
#[derive(Debug)]
pub struct Trying<'a> {
    slot: &'a Slot,
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
            if self.slot.pending.load(Ordering::Acquire)
                || (was_head && !self.satisfied.load(Ordering::Acquire))
            {
                // The wake-up this waiter did not use belongs to the next one; and a head
                // leaving unserved passes the baton, so the queue never waits on nobody.
                channel.wake(Wake::One);
            }
            if channel.slots.is_empty() {
                state.channels.remove(&*self.channel);
                self.shared.active.fetch_sub(1, Ordering::AcqRel);
                crate::metrics::channels(-1.0);
                kick = true;
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

/// Where the hub's subscriber connection goes.
#[derive(Clone)]
pub(crate) enum Source {
    /// Classic pub/sub (`SUBSCRIBE`) on one server, which `resolve(n)` names for connection
    /// attempt `n`: a standalone server, a cluster's seed nodes in turn (classic messages reach
    /// every node of a cluster), or the primary the sentinels name now. When the receiver
    /// changes (a Sentinel client moved to a new primary), the connection starts over.
    Classic(Resolver, Option<watch::Receiver<u64>>),
    /// Sharded pub/sub (`SSUBSCRIBE`) over a cluster connection: one connection per shard,
    /// each channel subscribed on the primary of its slot, following failovers and slot moves.
    Sharded(Arc<dyn Fn() -> redis::cluster::ClusterClientBuilder + Send + Sync>),
}

/// Names the server of a classic subscriber connection, for connection attempt `n`.
pub(crate) type Resolver = Arc<
    dyn Fn(u32) -> futures::future::BoxFuture<'static, redis::RedisResult<redis::Client>>
        + Send
        + Sync,
>;

impl Source {
    /// Classic pub/sub on one fixed server.
    pub(crate) fn fixed(client: redis::Client) -> Self {
        Source::Classic(
            Arc::new(move |_| {
                let client = client.clone();
                Box::pin(async move { Ok(client) })
            }),
            None,
        )
    }

    /// Classic pub/sub on the current primary of a Sentinel set-up, moving with it.
    pub(crate) fn sentinel(primary: Arc<crate::sentinel::SentinelPrimary>) -> Self {
        let changes = primary.changes();
        Source::Classic(
            Arc::new(move |_| {
                let client = primary.primary_client();
                Box::pin(async move { Ok(client) })
            }),
            Some(changes),
        )
    }

    /// Classic pub/sub on the first of `clients` that answers, starting again from the next one
    /// after a failure.
    pub(crate) fn rotating(clients: Vec<redis::Client>) -> Self {
        Source::Classic(
            Arc::new(move |n| {
                let len = u32::try_from(clients.len()).unwrap_or(u32::MAX).max(1);
                let pick = usize::try_from(n % len).unwrap_or(0);
                let client = clients.get(pick).cloned();
                Box::pin(async move {
                    client.ok_or_else(|| {
                        redis::RedisError::from((
                            redis::ErrorKind::InvalidClientConfig,
                            "no seed node",
                        ))
                    })
                })
            }),
            None,
        )
    }
}

/// What the subscriber connection reports.
enum Event {
    /// A message on a channel.
    Message(String, Vec<u8>),
    /// The connection subscribed a channel again by itself (a shard's connection came back,
    /// or its slot moved): anything may have been published meanwhile.
    Renewed(String),
    /// The server dropped a channel (its slot moved to another shard): subscribe it again, on
    /// the slot's new owner.
    Dropped(String),
    /// A shard's connection broke (its primary died or fails over).
    ShardDown,
    /// Nothing to report (a confirmation of our own request).
    Nothing,
}

/// One subscriber connection (classic) or one cluster connection holding a subscriber
/// connection per shard (sharded).
enum Session {
    Classic {
        sink: redis::aio::PubSubSink,
        stream: redis::aio::PubSubStream,
    },
    Sharded {
        conn: redis::cluster_async::ClusterConnection,
        pushes: tokio::sync::mpsc::UnboundedReceiver<redis::PushInfo>,
        /// Confirmations still due for our own (un)subscribe requests, by channel: the others
        /// are the connection's (or the server's) doing.
        expected_subscribes: HashMap<String, u32>,
        expected_unsubscribes: HashMap<String, u32>,
    },
}

impl Session {
    async fn open(source: &Source, attempt: u32) -> redis::RedisResult<Self> {
        match source {
            Source::Classic(resolve, _) => {
                let client = resolve(attempt).await?;
                let (sink, stream) = client.get_async_pubsub().await?.split();
                Ok(Session::Classic { sink, stream })
            }
            Source::Sharded(builder) => {
                let (tx, pushes) = tokio::sync::mpsc::unbounded_channel();
                let client = builder()
                    .use_protocol(redis::ProtocolVersion::RESP3)
                    .push_sender(tx)
                    .build()?;
                let conn = client.get_async_connection().await?;
                Ok(Session::Sharded {
                    conn,
                    pushes,
                    expected_subscribes: HashMap::new(),
                    expected_unsubscribes: HashMap::new(),
                })
            }
        }
    }

    async fn subscribe(&mut self, channels: &[String]) -> redis::RedisResult<()> {
        match self {
            Session::Classic { sink, .. } => sink.subscribe(channels).await,
            Session::Sharded {
                conn,
                expected_subscribes,
                ..
            } => {
                // One SSUBSCRIBE per slot: a shard channel command may not span slots.
                for group in by_slot(channels) {
                    for c in &group {
                        *expected_subscribes.entry(c.clone()).or_default() += 1;
                    }
                    conn.ssubscribe(&group).await?;
                }
                Ok(())
            }
        }
    }

    async fn unsubscribe(&mut self, channels: &[String]) -> redis::RedisResult<()> {
        match self {
            Session::Classic { sink, .. } => sink.unsubscribe(channels).await,
            Session::Sharded {
                conn,
                expected_unsubscribes,
                ..
            } => {
                for group in by_slot(channels) {
                    for c in &group {
                        *expected_unsubscribes.entry(c.clone()).or_default() += 1;
                    }
                    conn.sunsubscribe(&group).await?;
                }
                Ok(())
            }
        }
    }

    /// The next event; `None` when the connection is gone.
    async fn next(&mut self) -> Option<Event> {
        match self {
            Session::Classic { stream, .. } => {
                let message = stream.next().await?;
                Some(Event::Message(
                    message.get_channel_name().to_owned(),
                    message.get_payload_bytes().to_vec(),
                ))
            }
            Session::Sharded {
                pushes,
                expected_subscribes,
                expected_unsubscribes,
                ..
            } => {
                let push = pushes.recv().await?;
                let channel = push.data.first().and_then(|v| match v {
                    Value::BulkString(bytes) => String::from_utf8(bytes.clone()).ok(),
                    _ => None,
                });
                let expected = |map: &mut HashMap<String, u32>, channel: &str| {
                    let Some(n) = map.get_mut(channel) else {
                        return false;
                    };
                    *n -= 1;
                    if *n == 0 {
                        map.remove(channel);
                    }
                    true
                };
                Some(match (push.kind, channel) {
                    (redis::PushKind::SMessage | redis::PushKind::Message, Some(channel)) => {
                        let payload = match push.data.get(1) {
                            Some(Value::BulkString(bytes)) => bytes.clone(),
                            _ => Vec::new(),
                        };
                        Event::Message(channel, payload)
                    }
                    (redis::PushKind::SSubscribe, Some(channel)) => {
                        if expected(expected_subscribes, &channel) {
                            Event::Nothing
                        } else {
                            Event::Renewed(channel)
                        }
                    }
                    (redis::PushKind::SUnsubscribe, Some(channel)) => {
                        if expected(expected_unsubscribes, &channel) {
                            Event::Nothing
                        } else {
                            Event::Dropped(channel)
                        }
                    }
                    (redis::PushKind::Disconnection, _) => Event::ShardDown,
                    _ => Event::Nothing,
                })
            }
        }
    }
}

use redis::Value;

/// `channels` grouped by hash slot (the order within a group kept).
fn by_slot(channels: &[String]) -> Vec<Vec<String>> {
    let mut groups: HashMap<u16, Vec<String>> = HashMap::new();
    for c in channels {
        groups
            .entry(crate::keys::hash_slot(c))
            .or_default()
            .push(c.clone());
    }
    groups.into_values().collect()
}

struct Driver {
    shared: Arc<HubShared>,
    source: Source,
    connect_timeout: Duration,
    response_timeout: Duration,
    retry: RetryPolicy,
}

/// How long a channel stays subscribed after its last waiter left.
const LINGER: Duration = Duration::from_secs(2);

/// Resolves when the primary moved (never without a change signal, or once it is gone).
async fn primary_moved(changes: &mut Option<watch::Receiver<u64>>) {
    match changes {
        Some(changes) => {
            if changes.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
        None => std::future::pending().await,
    }
}

/// Sleeps until `due`; forever when there is none.
async fn sleep_until_some(due: Option<Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due).await,
        None => std::future::pending().await,
    }
}

impl Driver {
    async fn run(self) {
        let mut failures = 0u32;
        let mut attempt = 0u32;
        loop {
            if self.shared.state().closed {
                return;
            }
            let connection =
                tokio::time::timeout(self.connect_timeout, Session::open(&self.source, attempt))
                    .await;
            attempt = attempt.wrapping_add(1);
            let mut session = match connection {
                Ok(Ok(session)) => session,
                Ok(Err(e)) => {
                    failures += 1;
                    tracing::debug!(error = %e, failures, "pub/sub connection failed");
                    self.pause(failures).await;
                    continue;
                }
                Err(_) => {
                    failures += 1;
                    tracing::debug!(failures, "pub/sub connection timed out");
                    self.pause(failures).await;
                    continue;
                }
            };
            // The next connection starts with the same server, unless this one fails.
            attempt = attempt.wrapping_sub(1);
            let reconnected = {
                let mut state = self.shared.state();
                state.epoch += 1;
                state.connected = true;
                // Nothing is subscribed on the new connection until the first reconcile.
                state.live.clear();
                self.shared.live.store(0, Ordering::Release);
                state.epoch > 1
            };
            if failures > 0 || reconnected {
                tracing::info!("pub/sub connection established");
            }
            let mut moved = match &self.source {
                Source::Classic(_, Some(changes)) => {
                    let mut changes = changes.clone();
                    changes.mark_unchanged();
                    Some(changes)
                }
                _ => None,
            };
            let mut subscribed = HashSet::new();
            let mut lingering = HashMap::new();
            let mut healthy = self
                .reconcile(&mut session, &mut subscribed, &mut lingering)
                .await;
            if reconnected {
                // Whatever happened while the connection was down, nobody was told.
                // (Also after a shard went down and the session started over.)
                self.shared.wake_everyone();
            }
            while healthy {
                let linger_due = lingering.values().min().copied();
                tokio::select! {
                    biased;
                    () = self.shared.kick.notified() => {
                        if self.shared.state().closed {
                            return;
                        }
                        healthy = self.reconcile(&mut session, &mut subscribed, &mut lingering).await;
                    }
                    () = sleep_until_some(linger_due) => {
                        healthy = self.reconcile(&mut session, &mut subscribed, &mut lingering).await;
                    }
                    event = session.next() => match event {
                        Some(Event::Message(channel, payload)) => self.shared.message(&channel, &payload),
                        Some(Event::Renewed(channel)) => {
                            tracing::debug!(%channel, "channel subscribed again by the connection");
                            self.wake_channel(&channel);
                        }
                        Some(Event::Dropped(channel)) => {
                            // The slot moved. This connection's view of the slots is stale, and
                            // subscribing there would bounce off the old owner: start over with a
                            // fresh view, subscribing every channel where its slot is served now
                            // (waiters are woken to re-check; their calls follow the slot).
                            tracing::info!(%channel, "the server dropped a shard channel (its slot moved); subscribing again");
                            healthy = false;
                        }
                        Some(Event::ShardDown) => {
                            // Its slots may have a new primary by the time it is back, which this
                            // connection would not learn while it sends nothing there: start
                            // over with a fresh view of the cluster, subscribing every channel
                            // where its slot is served now (until then, waiters re-check on
                            // their bounded waits).
                            tracing::info!("a shard's subscriber connection broke; subscribing again");
                            healthy = false;
                        }
                        Some(Event::Nothing) => {}
                        None => healthy = false,
                    },
                    () = primary_moved(&mut moved) => {
                        tracing::info!("the primary moved: the subscriber connection follows");
                        healthy = false;
                    }
                }
            }
            {
                let mut state = self.shared.state();
                state.connected = false;
                state.live.clear();
                self.shared.live.store(0, Ordering::Release);
            }
            self.shared.confirmations.send_modify(|n| *n += 1);
            tracing::warn!("pub/sub connection lost; waiters fall back to bounded re-checks");
            // Every waiter looks now: a Redis that went away is an outage their tries must
            // see (the outage limit runs from then), not one they sleep through.
            self.shared.wake_everyone();
            failures = 1;
            attempt = attempt.wrapping_add(1);
            self.pause(failures).await;
        }
    }

    fn wake_channel(&self, name: &str) {
        if let Some(channel) = self.shared.state().channels.get(name) {
            channel.wake(Wake::All);
        }
    }

    /// Backs off before the next connection attempt. Channel changes meanwhile leave a kick
    /// stored, so the first loop after reconnecting reconciles them.
    async fn pause(&self, failures: u32) {
        tokio::time::sleep(self.retry.backoff(failures)).await;
    }

    /// Brings the connection's subscriptions in line with the channels waiters are on.
    /// Returns false when the connection failed.
    async fn reconcile(
        &self,
        session: &mut Session,
        subscribed: &mut HashSet<String>,
        lingering: &mut HashMap<String, Instant>,
    ) -> bool {
        let (to_subscribe, to_unsubscribe) = {
            let mut state = self.shared.state();
            let add: Vec<String> = state
                .channels
                .keys()
                .filter(|c| !subscribed.contains(*c))
                .cloned()
                .collect();
            // A channel nobody waits on any more lingers before it is unsubscribed: the same
            // waiter (a task taking a fair lock in a loop) is often back within moments, and
            // then needs neither a SUBSCRIBE nor the wait for its confirmation.
            let now = Instant::now();
            lingering.retain(|c, _| !state.channels.contains_key(c));
            let mut remove = Vec::new();
            for c in subscribed
                .iter()
                .filter(|c| !state.channels.contains_key(*c))
            {
                let due = *lingering.entry(c.clone()).or_insert(now + LINGER);
                if due <= now {
                    remove.push(c.clone());
                }
            }
            // Out of `live` before the UNSUBSCRIBE is sent: no waiter may count on a channel
            // that is going away.
            for c in &remove {
                state.live.remove(c);
            }
            self.shared.live.store(state.live.len(), Ordering::Release);
            (add, remove)
        };
        if !to_subscribe.is_empty() {
            match tokio::time::timeout(self.response_timeout, session.subscribe(&to_subscribe))
                .await
            {
                Ok(Ok(())) => subscribed.extend(to_subscribe),
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "subscribe failed");
                    return false;
                }
                Err(_) => {
                    tracing::warn!("subscribe timed out");
                    return false;
                }
            }
        }
        if !to_unsubscribe.is_empty() {
            match tokio::time::timeout(self.response_timeout, session.unsubscribe(&to_unsubscribe))
                .await
            {
                Ok(Ok(())) => {
                    for c in &to_unsubscribe {
                        subscribed.remove(c);
                        lingering.remove(c);
                    }
                }
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "unsubscribe failed");
                    return false;
                }
                Err(_) => {
                    tracing::warn!("unsubscribe timed out");
                    return false;
                }
            }
        }
        {
            let mut state = self.shared.state();
            let epoch = state.epoch;
            for (name, channel) in state.channels.iter_mut() {
                if subscribed.contains(name) {
                    channel.confirmed_epoch = epoch;
                }
            }
            state.live.clone_from(subscribed);
            self.shared.live.store(state.live.len(), Ordering::Release);
        }
        self.shared.confirmations.send_modify(|n| *n += 1);
        true
    }
}

#[cfg(test)]
mod races {
    //! Race scenarios run both on real threads (unit tests) and under shuttle's schedules
    //! (model checks): the locks, flags and threads are std's or shuttle's by the feature.
    #![allow(clippy::unwrap_used, clippy::panic)]

    use super::*;
    #[cfg(feature = "model-check")]
    use shuttle::thread;
    #[cfg(not(feature = "model-check"))]
    use std::thread;

    const CH: &str = "ch";

    /// A waiter's retried try and a releaser's claim and hand-off. The waiter never both
    /// tries and receives a hand-off for the same round: either its try runs (no claim could
    /// be made meanwhile) or it finds the claim and takes the hand-off instead. A hand-off
    /// delivered is received exactly once (after the try ended, on the next round), and a
    /// claim always ends in a delivery.
    pub(super) fn try_vs_hand_off() {
        let hub = Arc::new(Hub::detached());
        let waiter = hub.subscribe(CH, lock_message_policy, Some(Arc::new(1u32)));
        let trying = Arc::new(AtomicBool::new(false));
        let releaser = {
            let (hub, trying) = (hub.clone(), trying.clone());
            thread::spawn(move || match hub.claim(CH, MAX_HANDOFF_STREAK) {
                Some(claim) => {
                    assert!(!trying.load(Ordering::SeqCst), "claimed while trying");
                    claim.deliver(Box::new(())).is_ok()
                }
                None => false,
            })
        };
        let mut received = 0;
        let claimed = match waiter.begin_try() {
            Ok(guard) => {
                trying.store(true, Ordering::SeqCst);
                thread::yield_now();
                assert!(
                    !waiter.slot.claimed.load(Ordering::SeqCst),
                    "trying while claimed"
                );
                trying.store(false, Ordering::SeqCst);
                drop(guard);
                false
            }
            Err(Some(_)) => {
                received += 1;
                true
            }
            Err(None) => true,
        };
        let delivered = releaser.join().unwrap();
        if claimed {
            assert!(delivered, "claimed but nothing delivered");
        }
        if let Err(Some(_)) = waiter.begin_try() {
            received += 1;
        }
        assert_eq!(received, usize::from(delivered));
    }
}

#[cfg(all(test, feature = "model-check"))]
mod model {
    //! Model checks of the claim/wake state machine: shuttle runs each scenario's threads under
    //! thousands of schedules (random, and PCT, which finds bugs of small depth with a known
    //! probability), every lock and flag of the hub a scheduling point.
    #![allow(clippy::unwrap_used, clippy::panic)]

    use super::*;
    use shuttle::thread;

    const CH: &str = "ch";
    const RANDOM_RUNS: usize = 3_000;
    const PCT_RUNS: usize = 3_000;
    const PCT_DEPTH: usize = 3;

    fn tag(n: u32) -> Option<Tag> {
        Some(Arc::new(n))
    }

    /// Runs `scenario` under random schedules and under PCT schedules.
    fn check(scenario: fn()) {
        shuttle::check_random(scenario, RANDOM_RUNS);
        shuttle::check_pct(scenario, PCT_RUNS, PCT_DEPTH);
    }

    /// The race the restart test found ([`races::try_vs_hand_off`](super::races)).
    #[test]
    fn a_try_and_a_hand_off_never_both_happen() {
        check(super::races::try_vs_hand_off);
    }

    /// A hand-off racing the waiter's leave (its future dropped): either the waiter is still
    /// there and the hand-off lands in its slot, where leaving drops it (which undoes it), or
    /// the releaser gets it back; it is undone exactly once either way, and never both
    /// delivered and returned.
    #[test]
    fn a_hand_off_to_a_leaving_waiter_is_undone_exactly_once() {
        struct Payload(Arc<AtomicUsize>);
        impl Drop for Payload {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        check(|| {
            let hub = Arc::new(Hub::detached());
            let waiter = hub.subscribe(CH, lock_message_policy, tag(1));
            let undone = Arc::new(AtomicUsize::new(0));
            let releaser = {
                let (hub, undone) = (hub.clone(), undone.clone());
                thread::spawn(move || {
                    hub.claim(CH, MAX_HANDOFF_STREAK)
                        .map(|claim| claim.deliver(Box::new(Payload(undone))).is_ok())
                })
            };
            drop(waiter);
            let outcome = releaser.join().unwrap();
            let expected = usize::from(outcome.is_some());
            assert_eq!(undone.load(Ordering::SeqCst), expected);
            assert_eq!(hub.stats(), (0, 0));
        });
    }

    /// A lock release's one wake-up is never swallowed by a waiter that leaves at the same
    /// moment (served already, so leaving alone does not pass the baton): the next waiter ends
    /// up woken.
    #[test]
    fn a_leaving_waiter_never_swallows_the_one_wake_up() {
        check(|| {
            let hub = Arc::new(Hub::detached());
            let first = hub.subscribe(CH, lock_message_policy, None);
            let second = hub.subscribe(CH, lock_message_policy, None);
            first.satisfied();
            let publisher = {
                let hub = hub.clone();
                thread::spawn(move || hub.shared.message(CH, b"0"))
            };
            drop(first);
            publisher.join().unwrap();
            assert!(
                second.slot.pending.load(Ordering::SeqCst),
                "the wake-up was lost"
            );
        });
    }

    /// Two releases while the client lets one pass: one wakes the waiter deferred, the other
    /// for real, in either order and while the waiter takes its wake-ups; the real one is
    /// never lost or turned into a deferred one.
    #[test]
    fn a_real_wake_up_is_never_lost_to_a_deferred_one() {
        check(|| {
            let hub = Arc::new(Hub::detached());
            let waiter = hub.subscribe(CH, lock_message_policy, tag(1));
            assert!(hub.claim_turn(CH, 0).is_none());
            let publishers: Vec<_> = (0..2)
                .map(|_| {
                    let hub = hub.clone();
                    thread::spawn(move || hub.shared.message(CH, b"0"))
                })
                .collect();
            let mut real = 0;
            let mut take = |waiter: &Subscription| {
                if let Some(Woken::Notified) = waiter.take_wake_up() {
                    real += 1;
                }
            };
            take(&waiter);
            thread::yield_now();
            take(&waiter);
            for p in publishers {
                p.join().unwrap();
            }
            take(&waiter);
            assert!(real >= 1, "the real wake-up was lost");
        });
    }

    /// A claim that fails (dropped without a delivery) while a release message arrives: the
    /// message skipped the claimed waiter, so dropping the claim wakes it.
    #[test]
    fn a_waiter_skipped_while_claimed_is_woken_when_the_claim_fails() {
        check(|| {
            let hub = Arc::new(Hub::detached());
            let waiter = hub.subscribe(CH, lock_message_policy, tag(1));
            let releaser = {
                let hub = hub.clone();
                thread::spawn(move || drop(hub.claim(CH, MAX_HANDOFF_STREAK)))
            };
            let publisher = {
                let hub = hub.clone();
                thread::spawn(move || hub.shared.message(CH, b"0"))
            };
            releaser.join().unwrap();
            publisher.join().unwrap();
            assert!(
                waiter.slot.pending.load(Ordering::SeqCst),
                "the wake-up was lost"
            );
        });
    }
}

#[cfg(all(test, not(feature = "model-check")))]
mod tests {
    //! The claim/wake state machine, without Redis: who a message wakes, who a releaser may
    //! claim, and the race of a waiter's own try with a local hand-off.
    #![allow(clippy::unwrap_used, clippy::panic)]

    use super::*;

    fn tag(n: u32) -> Option<Tag> {
        Some(Arc::new(n))
    }

    fn tag_of(claim: &Claim) -> u32 {
        *claim.tag().unwrap().downcast_ref::<u32>().unwrap()
    }

    const CH: &str = "ch";

    #[test]
    fn a_claim_takes_the_longest_waiting_free_tagged_waiter() {
        let hub = Hub::detached();
        let _untagged = hub.subscribe(CH, lock_message_policy, None);
        let first = hub.subscribe(CH, lock_message_policy, tag(1));
        let _second = hub.subscribe(CH, lock_message_policy, tag(2));
        assert!(hub.claim("other", MAX_HANDOFF_STREAK).is_none());
        // The first is trying: it cannot be claimed, the second is.
        let trying = first.begin_try().unwrap();
        let claim = hub.claim(CH, MAX_HANDOFF_STREAK).unwrap();
        assert_eq!(tag_of(&claim), 2);
        drop(trying);
        let claim1 = hub.claim(CH, MAX_HANDOFF_STREAK).unwrap();
        assert_eq!(tag_of(&claim1), 1);
        // Both claimed: nobody is left.
        assert!(hub.claim(CH, MAX_HANDOFF_STREAK).is_none());
        drop((claim, claim1));
    }

    #[tokio::test]
    async fn a_claimed_waiter_does_not_try_and_gets_the_hand_off() {
        let hub = Hub::detached();
        let waiter = hub.subscribe(CH, lock_message_policy, tag(1));
        let claim = hub.claim(CH, MAX_HANDOFF_STREAK).unwrap();
        // A retried acquire meeting the hand-off: the try must not run.
        assert!(matches!(waiter.begin_try(), Err(None)));
        claim.deliver(Box::new(7u32)).unwrap();
        match waiter.begin_try() {
            Err(Some(handoff)) => assert_eq!(*handoff.downcast::<u32>().unwrap(), 7),
            other => panic!("expected the hand-off, got {other:?}"),
        }
        // Nothing is left for a later round, not even a spurious wake-up.
        assert!(matches!(
            waiter.wait(Duration::from_millis(1)).await,
            Woken::TimedOut
        ));
    }

    #[tokio::test]
    async fn a_hand_off_to_a_waiter_that_left_comes_back_and_a_dropped_claim_wakes() {
        let hub = Hub::detached();
        let waiter = hub.subscribe(CH, lock_message_policy, tag(1));
        let claim = hub.claim(CH, MAX_HANDOFF_STREAK).unwrap();
        drop(waiter);
        let back = claim.deliver(Box::new(3u32)).unwrap_err();
        assert_eq!(*back.downcast::<u32>().unwrap(), 3);

        let waiter = hub.subscribe(CH, lock_message_policy, tag(1));
        drop(hub.claim(CH, MAX_HANDOFF_STREAK).unwrap());
        assert!(matches!(
            waiter.wait(Duration::from_secs(5)).await,
            Woken::Notified
        ));
    }

    #[tokio::test]
    async fn messages_wake_as_the_policy_says_and_skip_claimed_waiters() {
        let hub = Hub::detached();
        let a = hub.subscribe(CH, permits_message_policy, tag(1));
        let b = hub.subscribe(CH, permits_message_policy, tag(2));
        let c = hub.subscribe(CH, permits_message_policy, tag(3));
        let claim = hub.claim(CH, MAX_HANDOFF_STREAK).unwrap();
        assert_eq!(tag_of(&claim), 1);
        // Two permits released: the two unclaimed waiters wake, the claimed one does not.
        hub.shared.message(CH, b"2");
        let quick = Duration::from_millis(1);
        assert!(matches!(b.wait(quick).await, Woken::Notified));
        assert!(matches!(c.wait(quick).await, Woken::Notified));
        assert!(matches!(a.wait(quick).await, Woken::TimedOut));
        claim.deliver(Box::new(())).unwrap();
        assert!(matches!(a.wait(quick).await, Woken::Handed(_)));
        // A wake-up is used once: no spurious second one.
        assert!(matches!(b.wait(quick).await, Woken::TimedOut));
        assert!(matches!(a.wait(quick).await, Woken::TimedOut));
        // A count of zero wakes nobody.
        let d = hub.subscribe(CH, permits_message_policy, tag(4));
        hub.shared.message(CH, b"0");
        assert!(matches!(d.wait(quick).await, Woken::TimedOut));
    }

    #[tokio::test]
    async fn a_waiter_leaving_with_an_unused_wake_up_passes_it_on() {
        let hub = Hub::detached();
        let first = hub.subscribe(CH, lock_message_policy, None);
        let second = hub.subscribe(CH, lock_message_policy, None);
        hub.shared.message(CH, b"0");
        first.satisfied();
        drop(first);
        assert!(matches!(
            second.wait(Duration::from_secs(5)).await,
            Woken::Notified
        ));
    }

    #[test]
    fn hand_offs_stop_at_the_streak_limit_until_a_public_message() {
        let hub = Hub::detached();
        let waiters: Vec<_> = (0..4)
            .map(|i| hub.subscribe(CH, lock_message_policy, tag(i)))
            .collect();
        for _ in 0..2 {
            hub.claim(CH, 2).unwrap().deliver(Box::new(())).unwrap();
        }
        assert!(
            hub.claim(CH, 2).is_none(),
            "streak reached: release publicly"
        );
        assert!(hub.claim(CH, 2).is_some(), "the streak restarted");
        hub.shared.message(CH, b"1");
        drop(waiters);
        assert_eq!(hub.stats(), (0, 0));
    }

    /// Ends a turn on `hub`'s channel: the streak is spent (a limit of 0), local waiters wait.
    fn end_of_turn(hub: &Hub) {
        assert!(hub.claim_turn(CH, 0).is_none(), "the streak is spent");
    }

    #[tokio::test]
    async fn after_its_turn_a_client_lets_one_release_pass_per_other_subscriber() {
        let quick = Duration::from_millis(1);
        let hub = Hub::detached();
        let waiter = hub.subscribe(CH, lock_message_policy, tag(1));
        // The release's own message arrives before its reply: it is let pass, and the reply
        // (3 subscribers: this client and two others) lets one more pass.
        end_of_turn(&hub);
        hub.shared.message(CH, b"0");
        hub.end_turn(CH, 3);
        assert!(matches!(waiter.wait(quick).await, Woken::Deferred));
        hub.shared.message(CH, b"0");
        assert!(matches!(waiter.wait(quick).await, Woken::Deferred));
        hub.shared.message(CH, b"0");
        assert!(matches!(waiter.wait(quick).await, Woken::Notified));
        // The reply first: the same two pass.
        end_of_turn(&hub);
        hub.end_turn(CH, 3);
        for expected in ["deferred", "deferred", "notified"] {
            hub.shared.message(CH, b"0");
            let woken = waiter.wait(quick).await;
            match expected {
                "deferred" => assert!(matches!(woken, Woken::Deferred), "{woken:?}"),
                _ => assert!(matches!(woken, Woken::Notified), "{woken:?}"),
            }
        }
        // Another kind of message (a write lock's "1": everyone may enter) is never let pass.
        end_of_turn(&hub);
        hub.end_turn(CH, 3);
        hub.shared.message(CH, b"1");
        assert!(matches!(waiter.wait(quick).await, Woken::Notified));
    }

    #[tokio::test]
    async fn a_turn_nobody_else_waits_for_goes_on_at_once() {
        let quick = Duration::from_millis(1);
        let hub = Hub::detached();
        let waiter = hub.subscribe(CH, lock_message_policy, tag(1));
        // Own message first, let pass; then the reply says nobody else is subscribed: the
        // deferred wake-up becomes a real one, whether or not the waiter has looked yet.
        end_of_turn(&hub);
        hub.shared.message(CH, b"0");
        hub.end_turn(CH, 1);
        assert!(matches!(waiter.wait(quick).await, Woken::Notified));
        end_of_turn(&hub);
        hub.shared.message(CH, b"0");
        assert!(matches!(waiter.wait(quick).await, Woken::Deferred));
        hub.end_turn(CH, 1);
        assert!(matches!(waiter.wait(quick).await, Woken::Notified));
        // The reply first: its own message wakes the waiter for real.
        end_of_turn(&hub);
        hub.end_turn(CH, 1);
        hub.shared.message(CH, b"0");
        assert!(matches!(waiter.wait(quick).await, Woken::Notified));
        // Published nothing, or answered from the latch (0): nothing is let pass.
        end_of_turn(&hub);
        hub.end_turn(CH, 0);
        hub.shared.message(CH, b"0");
        assert!(matches!(waiter.wait(quick).await, Woken::Notified));
    }

    #[tokio::test]
    async fn only_a_turn_ending_release_lets_releases_pass() {
        let quick = Duration::from_millis(1);
        let hub = Hub::detached();
        let waiter = hub.subscribe(CH, lock_message_policy, tag(1));
        // A release that had local waiters to hand to and did not (no turn ended), and a
        // semaphore's claim at its streak limit: neither lets anything pass.
        hub.end_turn(CH, 5);
        hub.shared.message(CH, b"0");
        assert!(matches!(waiter.wait(quick).await, Woken::Notified));
        assert!(hub.claim(CH, 0).is_none());
        hub.end_turn(CH, 5);
        hub.shared.message(CH, b"0");
        assert!(matches!(waiter.wait(quick).await, Woken::Notified));
        // A reconnect forgets the turn: every waiter looks at once.
        end_of_turn(&hub);
        hub.end_turn(CH, 5);
        hub.shared.wake_everyone();
        assert!(matches!(waiter.wait(quick).await, Woken::Notified));
        hub.shared.message(CH, b"0");
        assert!(matches!(waiter.wait(quick).await, Woken::Notified));
    }

    /// The race the restart test found, run many times on real threads (shuttle explores its
    /// schedules under the model checks).
    #[test]
    fn a_try_and_a_hand_off_never_both_happen() {
        for _ in 0..2_000 {
            super::races::try_vs_hand_off();
        }
    }
}
