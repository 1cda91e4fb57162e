//! Hand-offs among one client's acquisitions that no Redis channel announces ([`LocalWaiters`]):
//! a RedLock's release spans several servers, so its waiters of one process queue on a local
//! channel of the hub instead, and its unlock hands them the lock there. Queue, claims, streak
//! and leaving are the hub's own: the one hand-off every kind goes through.

use std::time::Duration;

use crate::client::Client;
use crate::grant::{Grant, Takes};
use crate::pubsub::{Claim, Need, Subscription, Woken};

/// Local channel names start with this: no key-derived channel does.
const LOCAL_PREFIX: &str = "\u{0}ferrisson-local:";

/// The local channel `name` of a client's hub: a queue of this process's acquisitions that
/// only its own releases serve, by hand-off.
#[derive(Debug, Clone)]
pub struct LocalWaiters {
    client: Client,
    channel: String,
}

impl LocalWaiters {
    /// The local channel `name` of `client`'s hub.
    pub fn new(client: &Client, name: &str) -> Self {
        Self {
            client: client.clone(),
            channel: format!("{LOCAL_PREFIX}{name}"),
        }
    }

    /// Queues an acquisition that waits for `need`, last: its place, which takes it out when
    /// dropped (a hand-off that reached it and was never taken is undone then).
    pub fn join(&self, need: Need) -> LocalPlace {
        LocalPlace(self.client.local_waiter(&self.channel, need))
    }

    /// Reserves the longest-waiting acquisition that takes `takes` for a hand-off, unless
    /// `max_streak` hand-offs were made in a row (then the caller frees what it holds for
    /// everyone). Dropped without [`Claim::deliver`], the claim wakes the waiter to try again.
    pub fn claim(&self, takes: Takes, max_streak: u32) -> Option<Claim> {
        use crate::client::ClientEngine;
        self.client.claim_waiter(&self.channel, takes, max_streak)
    }

    /// Whether acquisitions of this process wait here.
    pub fn has_waiters(&self) -> bool {
        self.client.has_local_waiters(&self.channel)
    }
}

/// An acquisition's place on a local channel ([`LocalWaiters::join`]).
#[derive(Debug)]
pub struct LocalPlace(Subscription);

impl LocalPlace {
    /// Waits until a release hands this acquisition what it waits for (`Some`), or wakes it
    /// without (`None`: a claim that fell through, a reconnect: it should try again).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a hand-off that arrives meanwhile stays for the next call, or is undone
    /// when the place is dropped.
    pub async fn handed(&self) -> Option<Grant> {
        // Long, not forever: a bound the timer can hold.
        const BOUND: Duration = Duration::from_secs(3_600);
        loop {
            match self.0.wait(BOUND).await {
                Woken::Handed(grant) => return Some(grant),
                Woken::Notified | Woken::Deferred | Woken::Taken => return None,
                Woken::TimedOut => {}
            }
        }
    }

    /// A hand-off that has arrived (`Some(Some(grant))`, taken out here) or is on its way
    /// (`Some(None)`: [`handed`](Self::handed) gets it, or a wake-up if it fails), `None` when
    /// neither. Unlike a hub waiter's try, it leaves the place claimable.
    pub fn handed_or_coming(&self) -> Option<Option<Grant>> {
        self.0.handed_or_coming()
    }

    /// The acquisition got what it waited for: its leaving wakes nobody.
    pub fn satisfied(&self) {
        self.0.satisfied();
    }
}
