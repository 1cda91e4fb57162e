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
//! [`Need`] saying what it needs), runs the release, and [`delivers`](Claim::deliver) the result
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

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use std::time::Duration;
// The parent module decides whose: std's, or shuttle's under the model checks.
use super::hub_sync as sync;
use sync::{AtomicBool, AtomicU64, AtomicUsize, Mutex, MutexGuard};

use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use crate::config::RetryPolicy;
#[cfg(test)]
use crate::grant::Taken;
pub use crate::grant::{Grant, Takes};

/// Hand-offs to local waiters in a row (`ClientEngine::claim_waiter`)
/// before a release goes through Redis publicly, so that waiters of other clients (and
/// Redisson) get their turn. Every synchronizer that hands off locally uses this bound.
pub const MAX_HANDOFF_STREAK: u32 = 8;

/// How long a waiter woken by a release it lets pass ([`Woken::Deferred`]: its client just
/// had its turn) waits before it tries anyway, in case the client whose turn it is does not
/// take the lock (its waiters left, or it is Redisson's and took it already: then the try
/// finds the lock held and the waiter goes back to sleep).
pub const TURN_FALLBACK: Duration = Duration::from_millis(2);

/// The message a waiter that took a lock after a release publishes on the lock's channel (the
/// lean mutex's, `lock/mutex_acquire`): the waiters other clients woke deferred for that
/// release ([`Woken::Deferred`]) need not try at their [`TURN_FALLBACK`] (they would find it
/// held); the next release wakes them.
pub const TAKEN_MESSAGE: &[u8] = b"t";

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
    /// Wake every waiter whose interest shares a bit with this mask
    /// ([`WaitSpec::interest`](crate::wait::WaitSpec::interest)): a release that says what it freed (values of a
    /// faster multi-lock's group, each a bit of the mask) wakes only the waiters that want
    /// one of them.
    Matching(u64),
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

/// What a waiter tells a local releaser that may hand it what it waits for: how much it
/// needs, and who takes it for how long when the releaser makes the hold for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    /// How many permits it waits for (1 for a lock).
    pub count: u32,
    /// Who the hold is taken for (a lock's or an expirable permit's waiter), when the
    /// releaser makes the hold itself.
    pub owner: Option<crate::owner::Owner>,
    /// The fixed lease the waiter asked for (`None`: the watchdog keeps the hold).
    pub lease: Option<Duration>,
    /// What it takes: only a releaser that hands over that claims it.
    pub takes: Takes,
}

impl Need {
    /// A waiter for `count` permits that the releaser hands over as they are.
    pub fn permits(count: u32) -> Self {
        Self {
            count,
            owner: None,
            lease: None,
            takes: Takes::Permits,
        }
    }

    /// A waiter for one hold of a lock taken for `owner` with `lease` (`None`: kept by the
    /// watchdog).
    pub fn hold(owner: crate::owner::Owner, lease: Option<Duration>) -> Self {
        Self {
            count: 1,
            owner: Some(owner),
            lease,
            takes: Takes::Hold,
        }
    }

    /// A waiter for one expirable permit taken for `owner` with `lease` (`None`: kept by the
    /// watchdog).
    pub fn permit(owner: crate::owner::Owner, lease: Option<Duration>) -> Self {
        Self {
            takes: Takes::Permit,
            ..Self::hold(owner, lease)
        }
    }
}

/// How a [`Subscription::wait`] ended.
#[derive(Debug)]
pub(crate) enum Woken {
    /// A message (or a reconnect) says: try again.
    Notified,
    /// The bound passed without a wake-up.
    TimedOut,
    /// A local releaser handed this waiter the synchronizer.
    Handed(Grant),
    /// A release the waiter's client lets pass: other clients' waiters take their turn first.
    /// The waiter waits again, up to [`TURN_FALLBACK`], and tries only if nothing else wakes it.
    Deferred,
    /// In that wait ([`Subscription::wait_fallback`]): another client's waiter took the lock
    /// ([`TAKEN_MESSAGE`]). The waiter sleeps until the next release instead of trying.
    Taken,
}

mod channel;
mod claim;

use channel::*;
pub use claim::Claim;

/// A channel's turn between clients, kept while no local waiter is on it: the hand-off
/// streak and the releases still to let pass.
struct KeptTurn {
    streak: u32,
    skips: u32,
    at: std::time::Instant,
}

/// How long a kept turn lasts at most (only its memory's bound: a public message seen, or a
/// channel taken up again, ends it first).
const KEPT_TURN: Duration = Duration::from_secs(60);

#[derive(Default)]
struct HubState {
    channels: HashMap<String, Channel>,
    /// The turns of channels whose last local waiter left while the streak or the skips ran
    /// (see [`HubState::keep_turn`]).
    kept: HashMap<String, KeptTurn>,
    /// Channels subscribed and confirmed on the current connection, with local waiters or
    /// lingering after the last one left (see [`Hub::subscribe_if_live`]).
    live: HashSet<String>,
    /// Incremented at each successful (re)connection.
    epoch: u64,
    connected: bool,
    closed: bool,
    /// Keys tracked for a channel's waiters ([`Subscription::track`]), to the channel an
    /// invalidation of the key wakes.
    tracked: HashMap<Vec<u8>, Arc<str>>,
}

pub(crate) struct HubShared {
    state: Mutex<HubState>,
    /// How many channels have local waiters: lets the uncontended path skip the hub's lock.
    active: AtomicUsize,
    /// How many channels are live (`HubState::live`), for the same purpose.
    live: AtomicUsize,
    kick: Notify,
    confirmations: watch::Sender<u64>,
    /// The command connection's tracking, which redirects to this hub's subscriber connection
    /// ([`crate::tracking`]).
    tracking: Arc<crate::tracking::Tracking>,
}

impl HubState {
    /// A new entry for `name`, with the turn kept for it, if any.
    fn new_channel(&mut self, name: &str, policy: WakePolicy, confirmed_epoch: u64) -> Channel {
        let mut channel = Channel::new(name, policy, confirmed_epoch);
        if let Some(kept) = self.kept.remove(name) {
            channel.streak = kept.streak;
            channel.skips = kept.skips;
        }
        channel
    }

    /// The last local waiter left `channel`, removed here: its turn is kept for the next. With
    /// two tasks that take a lock in turn, each hand-off leaves the channel without a waiter
    /// for a moment (the task handed the lock stops waiting before the other waits again):
    /// the streak, forgotten then, would never reach its limit, and the process would keep
    /// the lock from every other for good.
    fn keep_turn(&mut self, name: &str, channel: &Channel) {
        if channel.streak == 0 && channel.skips == 0 {
            return;
        }
        let now = std::time::Instant::now();
        self.kept
            .retain(|_, kept| now.saturating_duration_since(kept.at) < KEPT_TURN);
        self.kept.insert(
            name.to_owned(),
            KeptTurn {
                streak: channel.streak,
                skips: channel.skips,
                at: now,
            },
        );
    }
}

impl HubShared {
    /// A message arrived on `channel`: wake its waiters as the channel's policy says.
    fn message(&self, channel: &str, payload: &[u8]) {
        let mut state = self.state();
        if payload == TAKEN_MESSAGE {
            // Not a release: no streak, turn or observer is concerned.
            if let Some(channel) = state.channels.get(channel) {
                channel.taken();
            }
            return;
        }
        if !state.channels.contains_key(channel) {
            // Lingering: a public release ends any turn kept for the channel.
            state.kept.remove(channel);
        }
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

    /// Tracked keys changed (`None`: all of them, a flush): each wakes its channel as a
    /// release message does.
    fn invalidated(&self, keys: Option<&[Vec<u8>]>) {
        self.tracking.invalidated();
        let channels: Vec<Arc<str>> = {
            let state = self.state();
            match keys {
                Some(keys) => keys
                    .iter()
                    .filter_map(|key| state.tracked.get(key).cloned())
                    .collect(),
                None => state.tracked.values().cloned().collect(),
            }
        };
        for channel in channels {
            self.message(&channel, b"0");
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
                tracking: Arc::default(),
            }),
        }
    }

    /// Starts the driver on the current Tokio runtime.
    pub(crate) fn start(
        tracking: Arc<crate::tracking::Tracking>,
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
            tracking,
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
        need: Option<Need>,
    ) -> Subscription {
        self.register(channel, policy, new_slot(need))
    }

    /// Registers an observer of `channel` (see `Slot::observer`), woken by every message on
    /// it and by every reconnect; the channel is subscribed if it was not, with `policy` for
    /// the waiters that may join it.
    pub(crate) fn observe(&self, channel: &str, policy: WakePolicy) -> Subscription {
        self.register(channel, policy, slot(None, true))
    }

    /// Registers a waiter for `need` on the local channel `channel`: a queue of this
    /// process's acquisitions that only its own releases serve, by hand-off ([`claim`]
    /// (Self::claim)); nothing is subscribed on the server, and no message wakes it (a
    /// reconnect, or a claim that falls through, does).
    pub(crate) fn subscribe_local(&self, channel: &str, need: Need) -> Subscription {
        self.register_as(channel, lock_message_policy, new_slot(Some(need)), true)
    }

    fn register(&self, channel: &str, policy: WakePolicy, slot: Arc<Slot>) -> Subscription {
        self.register_as(channel, policy, slot, false)
    }

    fn register_as(
        &self,
        channel: &str,
        policy: WakePolicy,
        slot: Arc<Slot>,
        local: bool,
    ) -> Subscription {
        let mut state = self.shared.state();
        let mut kick = false;
        let mut fresh = None;
        if !state.channels.contains_key(channel) {
            // A local channel has nothing for the driver to subscribe, and is no subscribed
            // channel in the metrics.
            kick = !local;
            self.shared.active.fetch_add(1, Ordering::AcqRel);
            if !local {
                crate::metrics::channels(1.0);
            }
            let mut channel = state.new_channel(channel, policy, 0);
            channel.local = local;
            fresh = Some(channel);
        }
        let entry = state
            .channels
            .entry(channel.to_owned())
            .or_insert_with(|| fresh.unwrap_or_else(|| Channel::new(channel, policy, 0)));
        entry.observers = entry.observers.saturating_add(usize::from(slot.observer));
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
        need: impl FnOnce() -> Option<Need>,
    ) -> Option<Subscription> {
        if self.shared.active.load(Ordering::Acquire) == 0 {
            return None;
        }
        self.register_confirmed(channel, None, None, need)
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
        need: impl FnOnce() -> Option<Need>,
        behind: &dyn Fn(&Need) -> bool,
    ) -> Option<Subscription> {
        if self.shared.active.load(Ordering::Acquire) == 0 {
            return None;
        }
        self.register_confirmed(channel, None, Some(behind), need)
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
        need: impl FnOnce() -> Option<Need>,
    ) -> Option<Subscription> {
        if self.shared.active.load(Ordering::Acquire) == 0
            && self.shared.live.load(Ordering::Acquire) == 0
        {
            return None;
        }
        self.register_confirmed(channel, Some(policy), None, need)
    }

    /// The waiter's slot on a confirmed channel; with `lingering` (the policy of a channel
    /// taken back from lingering), also on a live channel nobody waits on.
    fn register_confirmed(
        &self,
        channel: &str,
        lingering: Option<WakePolicy>,
        behind: Option<&dyn Fn(&Need) -> bool>,
        need: impl FnOnce() -> Option<Need>,
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
            let entry = state.new_channel(channel, policy, epoch);
            state.channels.insert(channel.to_owned(), entry);
        }
        let entry = state.channels.get_mut(channel)?;
        if entry.confirmed_epoch != epoch {
            return None;
        }
        if lingering.is_none() && entry.observers == entry.slots.len() {
            // Only observers: no local waiter to queue behind.
            return None;
        }
        if let Some(behind) = behind
            && !entry
                .slots
                .iter()
                .any(|s| s.failed.load(Ordering::Acquire) && s.need.as_ref().is_some_and(behind))
        {
            return None;
        }
        let slot = new_slot(need());
        entry.slots.push_back(slot.clone());
        let name = entry.name.clone();
        drop(state);
        Some(self.subscription(name, slot))
    }

    /// Reserves the longest-waiting tagged waiter of `channel` that takes a `P` for a
    /// hand-off, unless the channel's hand-off streak has reached `max_streak` (then the
    /// streak restarts and the caller should release publicly).
    pub(crate) fn claim(&self, channel: &str, takes: Takes, max_streak: u32) -> Option<Claim> {
        self.claim_or_yield(channel, takes, max_streak, false)
    }

    /// As [`claim`](Self::claim), for a lock: when the streak has reached `max_streak` and
    /// local waiters wait, the client's turn ends. The caller releases publicly and reports
    /// how many subscribers its release message reached ([`end_turn`](Self::end_turn)); its
    /// own waiters let that message pass, and as many more as there are other clients
    /// subscribed, so that each of them gets a turn before this client's next (see
    /// "Turns between clients" in [docs/architecture.md](https://github.com/ferrisson/ferrisson/blob/main/docs/architecture.md)).
    pub(crate) fn claim_turn(&self, channel: &str, takes: Takes, max_streak: u32) -> Option<Claim> {
        self.claim_or_yield(channel, takes, max_streak, true)
    }

    fn claim_or_yield(
        &self,
        channel: &str,
        takes: Takes,
        max_streak: u32,
        turns: bool,
    ) -> Option<Claim> {
        if self.shared.active.load(Ordering::Acquire) == 0 {
            return None;
        }
        let mut state = self.shared.state();
        let entry = state.channels.get_mut(channel)?;
        if entry.streak >= max_streak {
            entry.streak = 0;
            if turns && entry.slots.iter().any(|s| s.need.is_some()) {
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
                s.need.as_ref().is_some_and(|need| need.takes == takes)
                    && !s.claimed.load(Ordering::Acquire)
                    && !s.busy.load(Ordering::Acquire)
                    && !s.pending.load(Ordering::Acquire)
                    // Handed something already, not yet taken: a second hand-off would
                    // replace (and undo) the first.
                    && s.handoff.lock().unwrap_or_else(|e| e.into_inner()).is_none()
            })?
            .clone();
        let need = slot.need.clone()?;
        slot.claimed.store(true, Ordering::Release);
        entry.streak += 1;
        drop(state);
        Some(Claim {
            shared: self.shared.clone(),
            channel: channel.to_owned(),
            slot,
            need,
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

    /// Whether waiters of this client wait on `channel`.
    pub(crate) fn has_waiters(&self, channel: &str) -> bool {
        // No channel has waiters: nothing to look up (the uncontended path takes no lock).
        if self.shared.active.load(Ordering::Acquire) == 0 {
            return false;
        }
        self.shared
            .state()
            .channels
            .get(channel)
            .is_some_and(|entry| entry.slots.len() > entry.observers)
    }

    /// How many channels are subscribed (or about to be) and how many waiters wait on them.
    pub(crate) fn stats(&self) -> (usize, usize) {
        let state = self.shared.state();
        let waiters = state.channels.values().map(|c| c.slots.len()).sum();
        let subscribed = state.channels.values().filter(|c| !c.local).count();
        (subscribed, waiters)
    }

    /// Waiters asleep until a message, a hand-off or their bound, free for a local release to
    /// hand what it frees to: tagged for hand-offs, not claimed, not woken.
    pub(crate) fn parked(&self) -> usize {
        let state = self.shared.state();
        state
            .channels
            .values()
            .flat_map(|c| c.slots.iter())
            .filter(|s| {
                s.need.is_some()
                    && s.parked.load(Ordering::Acquire)
                    && !s.claimed.load(Ordering::Acquire)
                    && !s.pending.load(Ordering::Acquire)
            })
            .count()
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        self.shared.state().closed = true;
        self.shared.kick.notify_one();
    }
}

mod driver;
mod subscription;

use driver::Driver;
pub(crate) use driver::Source;
pub use subscription::Subscription;

#[cfg(test)]
mod races;

/// A grant of `n` permits that gives nothing back (the hub's own checks).
#[cfg(test)]
fn test_grant(n: u32) -> Grant {
    Grant::new(
        Taken::Permits {
            count: n,
            epoch: None,
        },
        |_| {},
    )
}

/// A grant of one permit whose undo counts in `undone` (the hub's own checks).
#[cfg(test)]
fn counting_grant(undone: Arc<AtomicUsize>) -> Grant {
    Grant::new(
        Taken::Permits {
            count: 1,
            epoch: None,
        },
        move |_| {
            undone.fetch_add(1, Ordering::SeqCst);
        },
    )
}

/// How many permits a grant of permits carries (the hub's own checks).
#[cfg(test)]
fn granted_count(grant: Grant) -> u32 {
    match grant.accept() {
        Taken::Permits { count, .. } => count,
        Taken::Hold { .. } | Taken::Permit { .. } | Taken::Seeded { .. } | Taken::Holds { .. } => {
            u32::MAX
        }
    }
}

// The unit tests, or the model checks: the parent module's choice (`hub_checks`).
#[cfg(test)]
hub_checks!();
