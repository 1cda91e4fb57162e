//! Wake-ups for waiters whose holder's release publishes nothing, by server-assisted
//! invalidation (`CLIENT TRACKING`).
//!
//! A lean mutex held by another Redlock client (rslock, redsync, node-redlock, redis-py's
//! `Lock`) is released by a plain `DEL` or a compare-and-delete script: nothing is published.
//! A waiter behind such a holder arms tracking with its try instead: the try goes out right
//! behind `CLIENT CACHING yes` on the command connection, whose tracking (`OPTIN`, `NOLOOP`)
//! redirects to the hub's subscriber connection, so the try's read of the key makes Redis tell
//! the subscriber of the key's next change: a release, an expiry, an eviction, a renewal. The
//! hub turns that invalidation into the wake-up a release message would have been
//! ([`crate::pubsub`]).
//!
//! # What can go wrong, and the net
//!
//! - Tracking is one-shot per read: each try arms it again.
//! - The server forgets a connection's tracking when the connection goes. The command
//!   connection is armed again ([`Tracking::arming`] sends `CLIENT TRACKING on` again) after
//!   any failure that may mean a lost link, and after the subscriber connection came back with
//!   a new id. A reconnect the client did not see loses the wake-up: a tracked waiter still
//!   looks again once [`TRACKED_RECHECK`] has passed, and [`TrackingStats::missed`] counts the
//!   looks that found it free.
//! - A server that refuses the commands (an ACL without `client|tracking` or `client|caching`)
//!   ends the arming for the client: waiters re-check as they would without it.
//! - A Redis Cluster is not armed: a tracking redirect must name a connection on the key's
//!   own node, and the sharded subscriber is not one. Waiters there re-check.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use redis::Value;

/// How long a waiter whose try armed tracking sleeps at most before it looks again: the net
/// for a wake-up lost with a connection (the holder's lease, when shorter, bounds it too).
pub const TRACKED_RECHECK: Duration = Duration::from_secs(3);

/// What a client's server-assisted wake-ups did so far ([`Client::tracking_stats`]).
///
/// [`Client::tracking_stats`]: crate::Client::tracking_stats
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TrackingStats {
    /// Whether waiters arm tracking now: the subscriber connection is up with a known id, the
    /// server has not refused the commands, the deployment is not a cluster and the client's
    /// configuration allows it.
    pub available: bool,
    /// Tries that armed tracking (each behind a holder whose release publishes nothing).
    pub armed: u64,
    /// Invalidations the subscriber connection received (each a change of a tracked key).
    pub invalidations: u64,
    /// Tracked waits that found the lock free at their re-check, not woken: a wake-up was
    /// lost (a reconnect the client did not see), or the key changed in a way that tells
    /// nobody (it was only read).
    pub missed: u64,
}

/// A client's tracking state, shared by its command connections (each keeps which subscriber
/// its own tracking points at: [`Arming`]) and the hub that owns the subscriber.
#[derive(Debug, Default)]
pub(crate) struct Tracking {
    /// Whether the client may arm at all (its configuration, and not a cluster).
    enabled: AtomicBool,
    /// The subscriber connection's id (from `HELLO`), 0 while there is none.
    redirect: AtomicU64,
    /// The server refused a tracking command: no more arming.
    refused: AtomicBool,
    armed: AtomicU64,
    invalidations: AtomicU64,
    missed: AtomicU64,
}

/// The commands to send right before a tracked call, and what they arm ([`Tracking::arming`]).
pub(crate) struct Arming {
    pub(crate) cmds: Vec<redis::Cmd>,
    redirect: u64,
    /// Whether `cmds` start with `CLIENT TRACKING on`.
    enables: bool,
}

impl Tracking {
    pub(crate) fn new(enabled: bool) -> Self {
        Self {
            enabled: AtomicBool::new(enabled),
            ..Self::default()
        }
    }

    /// Arms nothing from now on (the client's configuration).
    pub(crate) fn disable(&self) {
        self.enabled.store(false, Ordering::Relaxed);
    }

    /// Whether a tracked call would be armed now.
    pub(crate) fn available(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
            && !self.refused.load(Ordering::Relaxed)
            && self.redirect.load(Ordering::Acquire) != 0
    }

    /// What goes before a tracked call on a connection whose tracking points at `armed_for`
    /// (0: not known on): `CLIENT TRACKING on REDIRECT <subscriber> OPTIN NOLOOP` unless that
    /// is the current subscriber, then `CLIENT CACHING yes`, which makes the call's reads
    /// tracked. `None` when tracking is not available.
    pub(crate) fn arming(&self, armed_for: u64) -> Option<Arming> {
        if !self.available() {
            return None;
        }
        let redirect = self.redirect.load(Ordering::Acquire);
        let mut cmds = Vec::with_capacity(2);
        let enables = armed_for != redirect;
        if enables {
            let mut on = redis::cmd("CLIENT");
            on.arg("TRACKING")
                .arg("on")
                .arg("REDIRECT")
                .arg(redirect)
                .arg("OPTIN")
                .arg("NOLOOP");
            cmds.push(on);
        }
        let mut caching = redis::cmd("CLIENT");
        caching.arg("CACHING").arg("yes");
        cmds.push(caching);
        Some(Arming {
            cmds,
            redirect,
            enables,
        })
    }

    /// Reads the replies to an arming's commands: whether the call behind them is tracked. A
    /// refusal (`NOPERM`, an unknown command) ends the arming for good; another error (a
    /// subscriber that went away meanwhile: its id no longer exists) leaves the connection to
    /// be armed again.
    /// `armed_for` is the connection's: set to the subscriber it now points at, or 0.
    pub(crate) fn armed(&self, arming: &Arming, replies: &[Value], armed_for: &AtomicU64) -> bool {
        let failed = replies.iter().find_map(|reply| match reply {
            Value::ServerError(e) => Some(e.clone()),
            _ => None,
        });
        match failed {
            None if replies.len() == arming.cmds.len() => {
                if arming.enables {
                    armed_for.store(arming.redirect, Ordering::Release);
                }
                self.armed.fetch_add(1, Ordering::Relaxed);
                true
            }
            None => false,
            Some(e) => {
                armed_for.store(0, Ordering::Release);
                let unknown = e.details().is_some_and(|d| d.contains("unknown"));
                if e.code() == "NOPERM" || (e.code() == "ERR" && unknown) {
                    if !self.refused.swap(true, Ordering::Relaxed) {
                        tracing::warn!(error = %e.details().unwrap_or(e.code()), "the server refused CLIENT TRACKING: waiters behind other Redlock clients re-check instead of being told of their release (grant +client|tracking +client|caching, docs/deployment.md)");
                    }
                } else {
                    tracing::debug!(error = ?e, "arming tracking failed; the next tracked call arms again");
                }
                false
            }
        }
    }

    /// The subscriber connection is up with id `id` (0: it is down, or its id is unknown).
    pub(crate) fn subscriber(&self, id: u64) {
        self.redirect.store(id, Ordering::Release);
    }

    pub(crate) fn invalidated(&self) {
        self.invalidations.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn missed(&self) {
        self.missed.fetch_add(1, Ordering::Relaxed);
        crate::metrics::tracking_missed();
        tracing::debug!("a tracked waiter found the lock free at its re-check: a wake-up was lost");
    }

    pub(crate) fn stats(&self) -> TrackingStats {
        TrackingStats {
            available: self.available(),
            armed: self.armed.load(Ordering::Relaxed),
            invalidations: self.invalidations.load(Ordering::Relaxed),
            missed: self.missed.load(Ordering::Relaxed),
        }
    }
}

/// Whether `token` is a ferrisson owner (`<client uuid>:<n>`): a holder whose release publishes
/// to marked waiters. Any other token is another Redlock client's, whose release publishes
/// nothing.
pub fn is_owner_token(token: &[u8]) -> bool {
    token.len() > 37 && token.get(36) == Some(&b':')
}

/// A waiter's tracking from one try to the next: whether its last try found a holder whose
/// release publishes nothing, and whether its last try armed tracking. Costs nothing until a
/// try arms (the flag a tracked call carries is made then): the uncontended path never does.
#[derive(Debug, Default)]
pub struct Tracked {
    foreign: AtomicBool,
    armed: std::sync::OnceLock<std::sync::Arc<AtomicBool>>,
}

impl Tracked {
    /// Whether the last try found a holder whose release publishes nothing.
    pub(crate) fn foreign(&self) -> bool {
        self.foreign.load(Ordering::Relaxed)
    }

    /// Whether the last try armed tracking: the wait's net is [`TRACKED_RECHECK`] then.
    pub(crate) fn armed(&self) -> bool {
        self.armed
            .get()
            .is_some_and(|armed| armed.load(Ordering::Relaxed))
    }

    /// The flag the next try arms tracking with, if it should (`can`: it waits subscribed
    /// and the client can arm): when the last try found a holder whose release publishes
    /// nothing.
    pub(crate) fn next_try(&self, can: bool) -> Option<&std::sync::Arc<AtomicBool>> {
        if can && self.foreign() {
            Some(self.armed.get_or_init(std::sync::Arc::default))
        } else {
            if let Some(armed) = self.armed.get() {
                armed.store(false, Ordering::Relaxed);
            }
            None
        }
    }

    /// What the try found: a holder whose release publishes nothing, or not.
    pub(crate) fn found(&self, foreign: bool) {
        self.foreign.store(foreign, Ordering::Relaxed);
    }
}
