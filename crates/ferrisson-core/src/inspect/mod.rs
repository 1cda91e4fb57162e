//! Who holds what: a read-only view of every synchronizer's layout ([`Client::inspect`],
//! [`Client::list_objects`]), for operators and for the `ferrisson` command-line tool.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::{Stream, StreamExt};
use redis::Value;

use crate::client::{Client, ClientEngine};
use crate::error::{Error, Result};
use crate::identity::{RECORD_PREFIX, client_tag, record_key};
use crate::script::{Script, ScriptCall};

/// Reading everything the layouts keep about one object (`lua/core/inspect.lua`).
pub(crate) static INSPECT: Script = Script::with_prelude(
    "core/inspect",
    &INSPECT_PRELUDE,
    include_str!("../../lua/inspect.lua"),
);

/// What every inspection script starts with (`lua/core/inspect_prelude.lua`): the facts every
/// reply begins with, and the names derived from the object's key. A kind's own inspection
/// script ([`KindInspection::script`]) is made `Script::with_prelude` of it.
pub static INSPECT_PRELUDE: Script = Script::new(
    "core/inspect_prelude",
    include_str!("../../lua/inspect_prelude.lua"),
);

/// The most members of a queue, a permit set, a latch's participants listed by
/// [`Client::inspect`] (the counts are always whole).
pub const INSPECT_LIMIT: usize = 100;

/// Which synchronizer a Redis object is, as far as its layout tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ObjectKind {
    /// A reentrant lock (Redisson's `RLock`), fenced or not.
    Lock,
    /// A semaphore.
    Semaphore,
    /// A kind its own crate registered ([`KindInspection`]): known where that crate is linked.
    Registered(&'static KindInspection),
}

impl ObjectKind {
    /// Every kind whose layout this crate reads itself (the others register with their
    /// crates: [`known`](Self::known)).
    pub const ALL: [ObjectKind; 2] = [Self::Lock, Self::Semaphore];

    /// Every kind this binary knows: [`ALL`](Self::ALL), then those registered by the crates
    /// linked into it ([`KindInspection`]), by name.
    pub fn known() -> Vec<ObjectKind> {
        let mut kinds = Self::ALL.to_vec();
        kinds.extend(kinds::registered().iter().copied().map(Self::Registered));
        kinds
    }

    /// The kind's name: `lock` or `semaphore`, or a registered kind's own (`fair-lock`,
    /// `spin-lock`, `rwlock`, `expirable-semaphore`, `mutex`, `latch`, …;
    /// what [`str::parse`] takes).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Registered(kind) => kind.name,
            Self::Lock => "lock",
            Self::Semaphore => "semaphore",
        }
    }

    /// The indefinite article of the kind's name ([`as_str`](Self::as_str)): "an" before
    /// `expirable-semaphore`, "a" before the others.
    pub fn article(self) -> &'static str {
        match self {
            Self::Registered(kind) => kind.article,
            _ => "a",
        }
    }

    /// Whether the kind keeps its state in a hash (else in a string).
    fn is_hash(self) -> bool {
        match self {
            Self::Registered(kind) => kind.main_type == "hash",
            _ => matches!(self, Self::Lock),
        }
    }

    /// Whether the kind is a lock (something a force unlock ends).
    pub fn is_lock(self) -> bool {
        match self {
            Self::Registered(kind) => kind.lock,
            _ => matches!(self, Self::Lock),
        }
    }
}

impl std::fmt::Display for ObjectKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ObjectKind {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let known = Self::known();
        known
            .iter()
            .copied()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = known.iter().map(|k| k.as_str()).collect();
                Error::InvalidArgument(format!(
                    "`{s}` is no synchronizer kind; expected one of {}",
                    names.join(", ")
                ))
            })
    }
}

/// A client's record **\[ext\]**: who a ferrisson client is ([`ClientConfig::with_client_record`](crate::ClientConfig::with_client_record)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientRecord {
    /// The client id (a UUID).
    pub id: String,
    /// The application's name ([`ClientConfig::with_app_name`](crate::ClientConfig::with_app_name)).
    pub app: String,
    /// The host the process runs on.
    pub host: String,
    /// The process id.
    pub pid: Option<u32>,
    /// The ferrisson version of the client.
    pub version: String,
    /// When the client was made (its clock).
    pub started_at: Option<SystemTime>,
    /// How long the record lives unless refreshed (a live client refreshes it every watchdog
    /// period).
    pub expires_in: Option<Duration>,
}

/// Who stands behind an owner or a permit.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Party {
    /// A ferrisson client whose record is there.
    Ferrisson(ClientRecord),
    /// A client id with no record: a Redisson client (or a ferrisson one with records off, or
    /// one that died more than a lease ago).
    Unrecorded {
        /// The client id, the owner's part before `:<n>`.
        client_id: String,
    },
    /// A value of no client id (another client of the standard Redlock layout, a permit id
    /// of Redisson's).
    Unknown,
}

impl Party {
    /// A line for people: `app on host (pid N)`, `Redisson client <id> (no record)`, or
    /// `unknown client`.
    pub fn describe(&self) -> String {
        match self {
            Self::Ferrisson(r) => match r.pid {
                Some(pid) => format!("{} on {} (pid {pid})", r.app, r.host),
                None => format!("{} on {}", r.app, r.host),
            },
            Self::Unrecorded { client_id } => {
                format!("Redisson client {client_id} (no ferrisson record)")
            }
            Self::Unknown => "unknown client".to_owned(),
        }
    }
}

/// How an owner holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HoldMode {
    /// The only holder (a lock, a spin or fair lock, a mutex).
    Exclusive,
    /// A read hold of a read-write lock.
    Read,
    /// The write hold of a read-write lock.
    Write,
}

impl HoldMode {
    /// `exclusive`, `read` or `write`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Exclusive => "exclusive",
            Self::Read => "read",
            Self::Write => "write",
        }
    }
}

/// One holder of a lock.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Holder {
    /// The owner as stored: `<client id>:<n>` (a peer's random token on a mutex).
    pub owner: String,
    /// How it holds.
    pub mode: HoldMode,
    /// Its hold count (re-entries; 1 for a mutex).
    pub count: u64,
    /// The lease left on the server (`None`: no expiry).
    pub lease_left: Option<Duration>,
    /// Who it is.
    pub party: Party,
}

impl Holder {
    /// `owner` holding as `mode`, `count` times, with `lease_left` on the server: what a
    /// registered kind's [`read`](KindInspection::read) reports (who the owner is, the core
    /// finds out).
    pub fn new(owner: String, mode: HoldMode, count: u64, lease_left: Option<Duration>) -> Self {
        Self {
            owner,
            mode,
            count,
            lease_left,
            party: Party::Unknown,
        }
    }
}

/// One waiter that the layout names (a fair lock's queue, a spin lock's next in line).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Waiter {
    /// The owner waiting.
    pub owner: String,
    /// Its place, 0 first.
    pub place: usize,
    /// Time left before the lock's scripts treat it as dead (Redisson's waiter timeout;
    /// `None`: none set).
    pub timeout_in: Option<Duration>,
    /// Time left on its ferrisson liveness deadline (**\[ext\]**; `None`: none, a Redisson
    /// waiter).
    pub alive_for: Option<Duration>,
    /// Who it is.
    pub party: Party,
}

impl Waiter {
    /// `owner` waiting at `place` (0 first), with `alive_for` left on its liveness deadline:
    /// what a registered kind's [`read`](KindInspection::read) reports (who the owner is, the
    /// core finds out).
    pub fn new(owner: String, place: usize, alive_for: Option<Duration>) -> Self {
        Self {
            owner,
            place,
            timeout_in: None,
            alive_for,
            party: Party::Unknown,
        }
    }
}

/// One taken permit of a permit-expirable semaphore.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TakenPermit {
    /// The permit id, 32 hex digits.
    pub id: String,
    /// The lease left (`None`: no lease, Redisson's "until released").
    pub lease_left: Option<Duration>,
    /// Who took it: ferrisson's permit ids start with the taking client's tag.
    pub party: Party,
}

impl TakenPermit {
    /// A taken permit as a kind's inspection reads it ([`KindInspection::read`]); who took
    /// it is filled in by the core.
    pub fn new(id: String, lease_left: Option<Duration>) -> Self {
        Self {
            id,
            lease_left,
            party: Party::Unknown,
        }
    }
}

impl PermitState {
    /// A semaphore's permits as a kind's inspection reads them ([`KindInspection::read`]).
    pub fn new(
        available: i64,
        taken: Option<u64>,
        permits: Vec<TakenPermit>,
        reserved_for: Option<(String, Duration)>,
    ) -> Self {
        Self {
            available,
            taken,
            permits,
            reserved_for,
        }
    }
}

/// A semaphore's permits.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PermitState {
    /// The permits an acquire would find free (for the expirable semaphore, expired permits
    /// not yet returned included).
    pub available: i64,
    /// Permits taken and not expired: known for the expirable semaphore only (a plain
    /// semaphore's layout keeps no holders, `None`).
    pub taken: Option<u64>,
    /// The taken permits, at most [`INSPECT_LIMIT`] (the expirable semaphore).
    pub permits: Vec<TakenPermit>,
    /// A waiter for several permits holds the reservation (**\[ext\]**): its id and how long
    /// it lasts.
    pub reserved_for: Option<(String, Duration)>,
}

/// A countdown latch's state.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LatchState {
    /// The count left (0: open).
    pub count: i64,
    /// How many participants counted down this round (**\[ext\]**).
    pub participant_count: u64,
    /// The participants, sorted, at most [`INSPECT_LIMIT`].
    pub participants: Vec<String>,
}

/// A rate limiter's state (its overall window).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RateState {
    /// Permits per interval.
    pub rate: i64,
    /// The interval.
    pub interval: Duration,
    /// Whether the rate applies to each client apart (its windows are per client, and only
    /// the overall one is shown).
    pub per_client: bool,
    /// The keep-alive (`None`: none).
    pub keep_alive: Option<Duration>,
    /// Permits left in the overall window as last counted (`None`: not used yet, the rate).
    pub available: Option<i64>,
    /// Permits given in the overall window.
    pub given_in_window: u64,
    /// When the first of them returns.
    pub next_return_in: Option<Duration>,
}

impl LatchState {
    /// A countdown latch's state, as its crate's inspection reads it
    /// ([`KindInspection::read`]).
    pub fn new(count: i64, participant_count: u64, participants: Vec<String>) -> Self {
        Self {
            count,
            participant_count,
            participants,
        }
    }
}

impl RateState {
    /// A rate limiter's state, as its crate's inspection reads it
    /// ([`KindInspection::read`]).
    pub fn new(
        rate: i64,
        interval: Duration,
        per_client: bool,
        keep_alive: Option<Duration>,
        available: Option<i64>,
        given_in_window: u64,
        next_return_in: Option<Duration>,
    ) -> Self {
        Self {
            rate,
            interval,
            per_client,
            keep_alive,
            available,
            given_in_window,
            next_return_in,
        }
    }
}

/// Everything the layout says about one object ([`Client::inspect`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ObjectInfo {
    /// The object's name (without the client's namespace).
    pub name: String,
    /// Its main key in Redis.
    pub key: String,
    /// Its kind; `None` when nothing is stored under the name.
    pub kind: Option<ObjectKind>,
    /// Whether the kind is certain: a count could be a semaphore or a latch armed by
    /// Redisson, a lock hash with nobody waiting a lock or a spin or fair lock (pass the kind
    /// to [`Client::inspect_as`] to settle it).
    pub kind_certain: bool,
    /// The main key's time to live (`None`: no expiry, or nothing there).
    pub ttl: Option<Duration>,
    /// The holders (locks).
    pub holders: Vec<Holder>,
    /// The waiters the layout names: a fair lock's queue (at most [`INSPECT_LIMIT`]), a spin
    /// lock's next in line.
    pub waiters: Vec<Waiter>,
    /// The fair lock's whole queue length.
    pub queue_length: u64,
    /// Connections subscribed to the object's wake-up channel: clients with a waiter asleep
    /// on it (each client subscribes once however many of its tasks wait, and stays
    /// subscribed up to 2 s after its last waiter left, in case another comes; `None`: the
    /// kind has no channel, or the server did not say).
    pub subscribers: Option<u64>,
    /// The fencing counter: the last token issued (fenced locks and mutexes).
    pub fencing_token: Option<u64>,
    /// A semaphore's permits.
    pub permits: Option<PermitState>,
    /// A countdown latch's state.
    pub latch: Option<LatchState>,
    /// A rate limiter's state.
    pub rate: Option<RateState>,
    /// What a [registered](ObjectKind::Registered) kind shows beyond its holders and waiters,
    /// as label and value (a group's values, say), in the kind's order.
    pub details: Vec<(String, String)>,
    /// The server's clock when it was read.
    pub read_at: SystemTime,
}

impl ObjectInfo {
    /// The object at `key` with nothing known of it yet: no kind, its time to live `pttl` (ms;
    /// negative: none), read at the server's `now` (epoch ms).
    pub(super) fn empty(client: &Client, key: &str, pttl: i64, now: u64) -> Self {
        let namespace = client.config().namespace();
        Self {
            name: key.strip_prefix(namespace).unwrap_or(key).to_owned(),
            key: key.to_owned(),
            kind: None,
            kind_certain: true,
            ttl: positive_ms(pttl),
            holders: Vec::new(),
            waiters: Vec::new(),
            queue_length: 0,
            subscribers: None,
            fencing_token: None,
            permits: None,
            latch: None,
            rate: None,
            details: Vec::new(),
            read_at: UNIX_EPOCH + Duration::from_millis(now),
        }
    }

    /// A line for people: the kind and state at a glance, as `ferrisson ls` shows it.
    pub fn summary(&self) -> String {
        let Some(kind) = self.kind else {
            return "nothing stored under this name".to_owned();
        };
        let mark = if self.kind_certain { "" } else { "?" };
        let mut line = format!("{kind}{mark}: ");
        let lease = |l: Option<Duration>| match l {
            Some(l) => format!("{:.1}s left", l.as_secs_f64()),
            None => "no expiry".to_owned(),
        };
        if kind.is_lock() {
            if self.holders.is_empty() {
                line.push_str("free");
            } else {
                let holders: Vec<String> = self
                    .holders
                    .iter()
                    .map(|h| {
                        format!(
                            "{} by {} ({})",
                            h.mode.as_str(),
                            h.party.describe(),
                            lease(h.lease_left)
                        )
                    })
                    .collect();
                line.push_str(&format!("held {}", holders.join("; ")));
            }
            let waiting = self.queue_length.max(self.waiters.len() as u64);
            if waiting > 0 {
                line.push_str(&format!(", {waiting} queued"));
            }
            if let Some(s) = self.subscribers.filter(|&s| s > 0) {
                line.push_str(&format!(", {s} subscribed"));
            }
        } else if let Some(p) = &self.permits {
            line.push_str(&format!("{} available", p.available));
            if let Some(taken) = p.taken {
                line.push_str(&format!(", {taken} taken"));
            }
            if let Some(s) = self.subscribers.filter(|&s| s > 0) {
                line.push_str(&format!(", {s} subscribed"));
            }
        } else if let Some(l) = &self.latch {
            line.push_str(&format!("count {}", l.count));
            if l.participant_count > 0 {
                line.push_str(&format!(", {} participant(s) counted", l.participant_count));
            }
            if let Some(s) = self.subscribers.filter(|&s| s > 0) {
                line.push_str(&format!(", {s} subscribed"));
            }
        } else if let Some(r) = &self.rate {
            line.push_str(&format!(
                "{} per {:?}{}, {} given in the window",
                r.rate,
                r.interval,
                if r.per_client { " per client" } else { "" },
                r.given_in_window
            ));
        }
        for (label, value) in &self.details {
            line.push_str(&format!(", {label} {value}"));
        }
        line
    }
}

mod facts;
mod keeper;
mod kinds;
mod list;
mod read;
mod waits;
mod watch;

use facts::*;
pub(crate) use keeper::CLIENT_WAITS;
pub use keeper::note_wait;
pub use kinds::{
    KindFacts, KindInspection, ObjectCall, ObjectFuture, delete_through, force_unlock_through,
    lock_channel,
};
#[cfg(test)]
use list::is_derived;
pub use waits::{TaskHold, TaskWait, WaitCycle, WaitGraph, WaitingTask};
pub use watch::ChangeWatch;
use watch::*;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_keys_are_told_from_main_keys() {
        for derived in [
            "{orders}:value",
            "{orders}:value:0b0e",
            "{orders}:record:abcd",
            "redisson_lock_token:{orders}",
            "ferrisson_client:0011223344556677",
            "orders{x}:timeout",
        ] {
            assert!(is_derived(derived), "{derived}");
        }
        for main in ["orders", "{orders}", "orders{x}", "a:b:c", "{orders}:mine"] {
            assert!(!is_derived(main), "{main}");
        }
    }

    #[test]
    fn owners_and_permit_ids_lead_to_their_clients_tag() {
        let id = "7c9e6679-7425-40de-944b-e07fc1f90ae7";
        let tag = client_tag(id).unwrap_or_default();
        assert_eq!(tag, 0x7c9e_6679_7425_40de);
        assert_eq!(owner_tag(&format!("{id}:12")), Some(tag));
        assert_eq!(owner_tag("7c9e6679742540de0123456789abcdef"), Some(tag));
        assert_eq!(owner_tag("random-peer-token"), None);
    }
}
