//! Waiters over pub/sub: one subscriber connection per client, shared by every waiter.
//!
//! # Implementation details
//!
//! A waiter (a task waiting for a lock, a permit, a latch) registers a *slot* on the channel
//! its synchronizer publishes on and gets a [`Subscription`]. The hub keeps, per channel, the
//! slots in arrival order and the channel's [`WakePolicy`], which turns a message's payload into
//! how many local waiters should try again (one for a lock release, all for a latch opening, up
//! to `n` for `n` released permits). A channel is subscribed while at least one slot is on it
//! and unsubscribed when the last one leaves; the desired set is reconciled with the connection
//! by one background task, the *driver*, which also owns the connection.
//!
//! Waking a slot sets its `pending` flag and stores a permit in its [`Notify`], so a wake-up
//! that arrives while the waiter is busy trying (not yet awaiting) is not lost: its next
//! [`Subscription::wait`] returns at once. A slot dropped with an unconsumed wake-up hands it to
//! the next slot of the channel, so a cancelled waiter never swallows the one wake-up a lock
//! release sends.
//!
//! Messages can still be lost (a reconnect, a publisher on another connection failing). So
//! waiters never wait on a message alone: they subscribe, wait until the subscription is
//! confirmed, *then* try again (no lost wake-up between a failed try and the wait), and bound
//! every wait by the TTL the try returned. When the connection breaks, the driver reconnects
//! with backoff, resubscribes every channel in one command and wakes every waiter, because
//! anything may have happened while it was away. While nothing changes, Redis sees no command
//! from any waiter.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use crate::config::RetryPolicy;

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

struct Slot {
    pending: AtomicBool,
    notify: Notify,
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
}

struct Channel {
    slots: VecDeque<Arc<Slot>>,
    policy: WakePolicy,
    /// The connection epoch in which the server confirmed the subscription (0: not yet).
    confirmed_epoch: u64,
}

impl Channel {
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
            if slot.wake() {
                woken += 1;
            }
        }
        woken
    }
}

#[derive(Default)]
struct HubState {
    channels: HashMap<String, Channel>,
    /// Incremented at each successful (re)connection.
    epoch: u64,
    connected: bool,
    closed: bool,
}

pub(crate) struct HubShared {
    state: Mutex<HubState>,
    kick: Notify,
    confirmations: watch::Sender<u64>,
}

impl HubShared {
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
    /// Starts the driver on the current Tokio runtime.
    pub(crate) fn start(
        client: redis::Client,
        connect_timeout: Duration,
        response_timeout: Duration,
        retry: RetryPolicy,
    ) -> Self {
        let shared = Arc::new(HubShared {
            state: Mutex::new(HubState::default()),
            kick: Notify::new(),
            confirmations: watch::Sender::new(0),
        });
        let driver = Driver {
            shared: shared.clone(),
            client,
            connect_timeout,
            response_timeout,
            retry,
        };
        tokio::spawn(driver.run());
        Self { shared }
    }

    /// Registers a waiter on `channel`; the channel is subscribed if it was not.
    pub(crate) fn subscribe(&self, channel: &str, policy: WakePolicy) -> Subscription {
        let slot = Arc::new(Slot {
            pending: AtomicBool::new(false),
            notify: Notify::new(),
        });
        let mut state = self.shared.state();
        let mut kick = false;
        state
            .channels
            .entry(channel.to_owned())
            .or_insert_with(|| {
                kick = true;
                Channel {
                    slots: VecDeque::new(),
                    policy,
                    confirmed_epoch: 0,
                }
            })
            .slots
            .push_back(slot.clone());
        drop(state);
        if kick {
            self.shared.kick.notify_one();
        }
        Subscription {
            shared: self.shared.clone(),
            channel: channel.to_owned(),
            slot,
        }
    }

    /// How many channels are subscribed (or about to be) and how many waiters wait on them.
    pub(crate) fn stats(&self) -> (usize, usize) {
        let state = self.shared.state();
        let waiters = state.channels.values().map(|c| c.slots.len()).sum();
        (state.channels.len(), waiters)
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
    channel: String,
    slot: Arc<Slot>,
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
                .get(&self.channel)
                .is_some_and(|c| c.confirmed_epoch == state.epoch)
    }

    /// Waits up to `timeout` for [`is_confirmed`](Self::is_confirmed); returns whether it is.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only observes.
    pub async fn confirmed(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
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

    /// Waits until this waiter is woken by a message (or a reconnect), or `bound` has passed.
    /// Returns whether it was woken. A wake-up that arrived since the last wait returns at once.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a wake-up that arrives after the future is dropped stays pending for the
    /// next wait, or passes to another waiter when the subscription is dropped.
    pub async fn wait(&self, bound: Duration) -> bool {
        if self.slot.pending.swap(false, Ordering::AcqRel) {
            return true;
        }
        let woken = tokio::time::timeout(bound, self.slot.notify.notified())
            .await
            .is_ok();
        // Consume the flag whichever way the wait ended: the caller tries again now anyway.
        self.slot.pending.swap(false, Ordering::AcqRel) || woken
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut state = self.shared.state();
        let mut kick = false;
        if let Some(channel) = state.channels.get_mut(&self.channel) {
            channel.slots.retain(|s| !Arc::ptr_eq(s, &self.slot));
            if self.slot.pending.load(Ordering::Acquire) {
                // The wake-up this waiter did not use belongs to the next one.
                channel.wake(Wake::One);
            }
            if channel.slots.is_empty() {
                state.channels.remove(&self.channel);
                kick = true;
            }
        }
        drop(state);
        if kick {
            self.shared.kick.notify_one();
        }
    }
}

struct Driver {
    shared: Arc<HubShared>,
    client: redis::Client,
    connect_timeout: Duration,
    response_timeout: Duration,
    retry: RetryPolicy,
}

impl Driver {
    async fn run(self) {
        let mut failures = 0u32;
        loop {
            if self.shared.state().closed {
                return;
            }
            let connection =
                tokio::time::timeout(self.connect_timeout, self.client.get_async_pubsub()).await;
            let pubsub = match connection {
                Ok(Ok(pubsub)) => pubsub,
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
            let reconnected = {
                let mut state = self.shared.state();
                state.epoch += 1;
                state.connected = true;
                state.epoch > 1
            };
            if failures > 0 || reconnected {
                tracing::info!("pub/sub connection established");
            }
            let (mut sink, mut stream) = pubsub.split();
            let mut subscribed = HashSet::new();
            let mut healthy = self.reconcile(&mut sink, &mut subscribed).await;
            if reconnected {
                // Whatever happened while the connection was down, nobody was told.
                let state = self.shared.state();
                for channel in state.channels.values() {
                    channel.wake(Wake::All);
                }
            }
            while healthy {
                tokio::select! {
                    biased;
                    () = self.shared.kick.notified() => {
                        if self.shared.state().closed {
                            return;
                        }
                        healthy = self.reconcile(&mut sink, &mut subscribed).await;
                    }
                    message = stream.next() => match message {
                        Some(message) => self.dispatch(&message),
                        None => healthy = false,
                    },
                }
            }
            self.shared.state().connected = false;
            self.shared.confirmations.send_modify(|n| *n += 1);
            tracing::warn!("pub/sub connection lost; waiters fall back to bounded re-checks");
            failures = 1;
            self.pause(failures).await;
        }
    }

    /// Backs off before the next connection attempt. Channel changes meanwhile leave a kick
    /// stored, so the first loop after reconnecting reconciles them.
    async fn pause(&self, failures: u32) {
        tokio::time::sleep(self.retry.backoff(failures)).await;
    }

    fn dispatch(&self, message: &redis::Msg) {
        let state = self.shared.state();
        if let Some(channel) = state.channels.get(message.get_channel_name()) {
            let wake = (channel.policy)(message.get_payload_bytes());
            channel.wake(wake);
        }
    }

    /// Brings the connection's subscriptions in line with the channels waiters are on.
    /// Returns false when the connection failed.
    async fn reconcile(
        &self,
        sink: &mut redis::aio::PubSubSink,
        subscribed: &mut HashSet<String>,
    ) -> bool {
        let (to_subscribe, to_unsubscribe) = {
            let state = self.shared.state();
            let add: Vec<String> = state
                .channels
                .keys()
                .filter(|c| !subscribed.contains(*c))
                .cloned()
                .collect();
            let remove: Vec<String> = subscribed
                .iter()
                .filter(|c| !state.channels.contains_key(*c))
                .cloned()
                .collect();
            (add, remove)
        };
        if !to_subscribe.is_empty() {
            match tokio::time::timeout(self.response_timeout, sink.subscribe(&to_subscribe)).await {
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
            match tokio::time::timeout(self.response_timeout, sink.unsubscribe(&to_unsubscribe))
                .await
            {
                Ok(Ok(())) => {
                    for c in &to_unsubscribe {
                        subscribed.remove(c);
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
        }
        self.shared.confirmations.send_modify(|n| *n += 1);
        true
    }
}
