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
pub(crate) static INSPECT: Script = Script::new("core/inspect", include_str!("../lua/inspect.lua"));

/// The most members of a queue, a permit set, a latch's participants listed by
/// [`Client::inspect`] (the counts are always whole).
pub const INSPECT_LIMIT: usize = 100;

/// Which synchronizer a Redis object is, as far as its layout tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ObjectKind {
    /// A reentrant lock (Redisson's `RLock`), fenced or not.
    Lock,
    /// A fair lock: a lock hash with a waiting queue.
    FairLock,
    /// A spin lock: a lock hash, with ferrisson's next-in-line reservation while one waits.
    SpinLock,
    /// A read-write lock.
    ReadWriteLock,
    /// The lean mutex on the standard Redlock layout **\[ext\]**.
    Mutex,
    /// A semaphore.
    Semaphore,
    /// A permit-expirable semaphore.
    ExpirableSemaphore,
    /// A countdown latch.
    CountDownLatch,
    /// A rate limiter.
    RateLimiter,
}

impl ObjectKind {
    /// Every kind.
    pub const ALL: [ObjectKind; 9] = [
        Self::Lock,
        Self::FairLock,
        Self::SpinLock,
        Self::ReadWriteLock,
        Self::Mutex,
        Self::Semaphore,
        Self::ExpirableSemaphore,
        Self::CountDownLatch,
        Self::RateLimiter,
    ];

    /// The kind's name: `lock`, `fair-lock`, `spin-lock`, `rwlock`, `mutex`, `semaphore`,
    /// `expirable-semaphore`, `latch` or `rate-limiter` (what [`str::parse`] takes).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Lock => "lock",
            Self::FairLock => "fair-lock",
            Self::SpinLock => "spin-lock",
            Self::ReadWriteLock => "rwlock",
            Self::Mutex => "mutex",
            Self::Semaphore => "semaphore",
            Self::ExpirableSemaphore => "expirable-semaphore",
            Self::CountDownLatch => "latch",
            Self::RateLimiter => "rate-limiter",
        }
    }

    /// The indefinite article of the kind's name ([`as_str`](Self::as_str)): "an" before
    /// `expirable-semaphore`, "a" before the others.
    pub fn article(self) -> &'static str {
        if matches!(self, Self::ExpirableSemaphore) {
            "an"
        } else {
            "a"
        }
    }

    /// Whether the kind keeps its state in a hash (else in a string).
    fn is_hash(self) -> bool {
        matches!(
            self,
            Self::Lock | Self::FairLock | Self::SpinLock | Self::ReadWriteLock | Self::RateLimiter
        )
    }

    /// Whether the kind is a lock (something a force unlock ends).
    pub fn is_lock(self) -> bool {
        matches!(
            self,
            Self::Lock | Self::FairLock | Self::SpinLock | Self::ReadWriteLock | Self::Mutex
        )
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
        Self::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|k| k.as_str()).collect();
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
    /// The server's clock when it was read.
    pub read_at: SystemTime,
}

impl ObjectInfo {
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
        line
    }
}

/// The facts `core/inspect` returns, by name.
#[derive(Debug, Default)]
struct Facts {
    now: u64,
    main_type: String,
    pttl: i64,
    fields: Vec<(String, String)>,
    value: Option<String>,
    token: Option<String>,
    mutex_token: Option<String>,
    queue_length: Option<u64>,
    queued: Vec<(String, String, String)>,
    reserved: Option<(String, i64)>,
    read_leases: HashMap<String, i64>,
    permits_taken: Option<(u64, u64)>,
    permits: Vec<(String, String)>,
    reservation: Option<(String, i64)>,
    round: Option<String>,
    participants: Option<u64>,
    participant: Vec<String>,
    window: Option<(String, u64, u64, String)>,
}

impl Facts {
    fn parse(reply: Vec<Vec<String>>) -> Self {
        let mut f = Facts::default();
        let num = |s: &str| s.parse::<i64>().unwrap_or(0);
        let unum = |s: &str| s.parse::<u64>().unwrap_or(0);
        for fact in reply {
            let at = |i: usize| fact.get(i).cloned().unwrap_or_default();
            match fact.first().map(String::as_str) {
                Some("now") => f.now = unum(&at(1)),
                Some("type") => f.main_type = at(1),
                Some("pttl") => f.pttl = num(&at(1)),
                Some("field") => f.fields.push((at(1), at(2))),
                Some("value") => f.value = Some(at(1)),
                Some("token") => f.token = Some(at(1)),
                Some("mutex_token") => f.mutex_token = Some(at(1)),
                Some("queue_length") => f.queue_length = Some(unum(&at(1))),
                Some("queued") => f.queued.push((at(1), at(2), at(3))),
                Some("reserved") => f.reserved = Some((at(1), num(&at(2)))),
                Some("read_lease") => {
                    f.read_leases.insert(at(1), num(&at(2)));
                }
                Some("permits_taken") => f.permits_taken = Some((unum(&at(1)), unum(&at(2)))),
                Some("permit") => f.permits.push((at(1), at(2))),
                Some("reservation") => f.reservation = Some((at(1), num(&at(2)))),
                Some("round") => f.round = Some(at(1)),
                Some("participants") => f.participants = Some(unum(&at(1))),
                Some("participant") => f.participant.push(at(1)),
                Some("window") => f.window = Some((at(1), unum(&at(2)), unum(&at(3)), at(4))),
                _ => {}
            }
        }
        f
    }

    fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(f, _)| f == name)
            .map(|(_, v)| v.as_str())
    }

    /// The kind the layout shows, and whether it is certain; `None` for nothing stored.
    fn kind(&self, key: &str) -> Result<Option<(ObjectKind, bool)>> {
        let foreign = || Error::WrongType {
            key: key.to_owned(),
        };
        Ok(Some(match self.main_type.as_str() {
            "none" => {
                // Nothing under the name, but a queue or taken permits may outlive it.
                if self.queue_length.is_some() {
                    (ObjectKind::FairLock, true)
                } else if self.permits_taken.is_some() {
                    (ObjectKind::ExpirableSemaphore, true)
                } else {
                    return Ok(None);
                }
            }
            "hash" => {
                const RATE_FIELDS: [&str; 4] = ["rate", "interval", "type", "keepAliveTime"];
                if self.field("mode").is_some() {
                    let ok = self.fields.iter().all(|(f, v)| {
                        if f == "mode" {
                            v == "read" || v == "write"
                        } else {
                            client_tag(f).is_some() && v.parse::<u64>().is_ok()
                        }
                    });
                    if !ok {
                        return Err(foreign());
                    }
                    (ObjectKind::ReadWriteLock, true)
                } else if self.field("rate").is_some() {
                    let ok = self.fields.iter().all(|(f, v)| {
                        RATE_FIELDS.contains(&f.as_str()) && v.parse::<i64>().is_ok()
                    });
                    if !ok {
                        return Err(foreign());
                    }
                    (ObjectKind::RateLimiter, true)
                } else {
                    let ok = self
                        .fields
                        .iter()
                        .all(|(f, v)| client_tag(f).is_some() && v.parse::<u64>().is_ok());
                    if !ok {
                        return Err(foreign());
                    }
                    if self.queue_length.is_some() {
                        (ObjectKind::FairLock, true)
                    } else if self.reserved.is_some() {
                        (ObjectKind::SpinLock, true)
                    } else {
                        (ObjectKind::Lock, self.token.is_some())
                    }
                }
            }
            "string" => {
                let value = self.value.as_deref().unwrap_or_default();
                if value.parse::<i64>().is_ok() {
                    if self.permits_taken.is_some() {
                        (ObjectKind::ExpirableSemaphore, true)
                    } else if self.round.is_some() || self.participants.is_some() {
                        (ObjectKind::CountDownLatch, true)
                    } else {
                        (ObjectKind::Semaphore, self.reservation.is_some())
                    }
                } else {
                    (
                        ObjectKind::Mutex,
                        client_tag(value).is_some() || self.mutex_token.is_some(),
                    )
                }
            }
            _ => return Err(foreign()),
        }))
    }
}

/// Whether a rate limiter's settings give each client its own rate.
fn per_client_of(facts: &Facts) -> bool {
    facts.field("type") == Some("1")
}

/// The permits the overall window of a rate limiter has left as of the read: the rate less
/// the permits given in the last interval (`value` is as of the last acquire, before permits
/// that left the window since came back). `None` before any acquire, and for per-client rates
/// (each client has a window of its own).
fn available_now(value: &str, rate: Option<i64>, given: u64, per_client: bool) -> Option<i64> {
    if per_client || value.is_empty() {
        return None;
    }
    let rate = rate?;
    Some(
        rate.saturating_sub(i64::try_from(given).unwrap_or(i64::MAX))
            .max(0),
    )
}

/// The channel the synchronizer of `kind` at `key` publishes its releases on (a fair lock's
/// waiters have a channel each, ; a rate limiter has none).
fn wake_channel(kind: ObjectKind, key: &str) -> Option<String> {
    use crate::keys::prefixed;
    Some(match kind {
        ObjectKind::Lock | ObjectKind::SpinLock => prefixed("redisson_lock__channel", key),
        ObjectKind::ReadWriteLock => prefixed("redisson_rwlock", key),
        ObjectKind::Semaphore | ObjectKind::ExpirableSemaphore => prefixed("redisson_sc", key),
        ObjectKind::CountDownLatch => format!("redisson_countdownlatch__channel__{{{key}}}"),
        ObjectKind::Mutex => prefixed("ferrisson_mutex__channel", key),
        ObjectKind::FairLock | ObjectKind::RateLimiter => return None,
    })
}

impl ObjectInfo {
    /// The channels a change of this object is announced on, as its kind's releases publish
    /// them: the release channel of a lock, a semaphore or a latch (opening, or armed again);
    /// a fair lock's releases by this library publish on its channel prefix too, beside the
    /// next waiter's own channel. Empty for a rate limiter and for nothing stored.
    /// Acquisitions send no message: a watcher subscribes to these to look again at once
    /// after a release, and looks again on a period for the rest.
    pub fn wake_channels(&self) -> Vec<String> {
        match self.kind {
            Some(ObjectKind::FairLock) => {
                vec![crate::keys::prefixed("redisson_lock__channel", &self.key)]
            }
            Some(kind) => wake_channel(kind, &self.key).into_iter().collect(),
            None => Vec::new(),
        }
    }
}

/// The release messages of one object, for a watcher ([`Client::watch_changes`]): it wakes on
/// every message on the object's channels and on every reconnect of the client's subscriber
/// connection, beside the object's waiters of this client and never in their place.
///
/// Dropping it unsubscribes (once no waiter of the client is on the channel either).
pub struct ChangeWatch {
    subscriptions: Vec<crate::pubsub::Subscription>,
}

impl std::fmt::Debug for ChangeWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChangeWatch")
            .field("channels", &self.subscriptions.len())
            .finish()
    }
}

impl ChangeWatch {
    /// Whether it watches anything: an object whose kind publishes no release (a rate
    /// limiter), or nothing stored, has no channel.
    pub fn is_watching(&self) -> bool {
        !self.subscriptions.is_empty()
    }

    /// Waits up to `within` for the server to confirm the subscriptions: from then on no
    /// message is missed. Returns whether they all were.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only observes.
    pub async fn confirmed(&self, within: Duration) -> bool {
        let all = self.subscriptions.iter().map(|s| s.confirmed(within));
        futures::future::join_all(all).await.into_iter().all(|c| c)
    }

    /// Waits until the object may have changed (a release message on one of its channels, or
    /// a reconnect, since the last call), or `within` has passed (`false`; also at once when
    /// nothing is watched). Messages that arrived meanwhile count as one.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a message that arrives after the future is dropped wakes the next call.
    pub async fn changed(&self, within: Duration) -> bool {
        if self.subscriptions.is_empty() {
            tokio::time::sleep(within).await;
            return false;
        }
        let waits = self.subscriptions.iter().map(|s| Box::pin(s.wait(within)));
        let (woken, _, _) = futures::future::select_all(waits).await;
        !matches!(woken, crate::pubsub::Woken::TimedOut)
    }
}

impl Client {
    /// Watches the release messages of the object `info` describes (see
    /// [`ObjectInfo::wake_channels`]) on the client's subscriber connection, wherever it runs
    /// (one server, Sentinel, Cluster with sharded pub/sub): a watcher reads the object again
    /// at each [`ChangeWatch::changed`], so that a state a release ends is seen however short
    /// it was. Acquisitions send no message: a watcher also reads on a period of its own.
    pub fn watch_changes(&self, info: &ObjectInfo) -> ChangeWatch {
        let policy: crate::pubsub::WakePolicy = match info.kind {
            Some(ObjectKind::Semaphore | ObjectKind::ExpirableSemaphore) => {
                crate::pubsub::permits_message_policy
            }
            Some(ObjectKind::CountDownLatch | ObjectKind::FairLock) => |_| crate::pubsub::Wake::All,
            _ => crate::pubsub::lock_message_policy,
        };
        let subscriptions = info
            .wake_channels()
            .iter()
            .map(|channel| self.hub().observe(channel, policy))
            .collect();
        ChangeWatch { subscriptions }
    }
}

/// `ms` milliseconds as a duration, `None` when not positive.
fn positive_ms(ms: i64) -> Option<Duration> {
    u64::try_from(ms)
        .ok()
        .filter(|&ms| ms > 0)
        .map(Duration::from_millis)
}

/// The time left until the epoch-ms `at`, seen at the epoch-ms `now`.
fn until(at: &str, now: u64) -> Option<Duration> {
    let at = at.parse::<f64>().ok()?;
    if !at.is_finite() {
        return None;
    }
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let at = at.max(0.0) as u64;
    Some(Duration::from_millis(at.saturating_sub(now)))
}

/// Redisson's score of a permit without a lease.
const NO_LEASE_SCORE: u64 = 922_337_203_685_477;

/// The tag that names the record of whoever stands behind an owner or permit id.
fn owner_tag(owner_or_id: &str) -> Option<u64> {
    client_tag(owner_or_id).or_else(|| {
        // A permit id: 32 hex digits, the first 16 the taking client's tag.
        (owner_or_id.len() == 32)
            .then(|| u64::from_str_radix(owner_or_id.get(..16)?, 16).ok())
            .flatten()
    })
}

/// The record read from a hash's fields and its time to live.
fn record_of(fields: HashMap<String, String>, pttl: i64) -> Option<ClientRecord> {
    let id = fields.get("id")?.clone();
    let text = |f: &str| fields.get(f).cloned().unwrap_or_default();
    Some(ClientRecord {
        id,
        app: text("app"),
        host: text("host"),
        pid: fields.get("pid").and_then(|p| p.parse().ok()),
        version: text("version"),
        started_at: fields
            .get("started")
            .and_then(|s| s.parse::<u64>().ok())
            .map(|ms| UNIX_EPOCH + Duration::from_millis(ms)),
        expires_in: positive_ms(pttl),
    })
}

impl Client {
    /// Everything the Redis layout says about the synchronizer named `name`: its kind, its
    /// holders (owner, hold count, lease left, and who the owner is: the app, host and pid of
    /// a ferrisson client from its record, the client id of a Redisson one), its waiters,
    /// its permits, a latch's count and participants, a rate limiter's window, the fencing
    /// counter. Read-only: nothing is changed, no waiter is woken.
    ///
    /// The kind comes from the layout; where two kinds share one (a semaphore and a latch
    /// armed by Redisson, a lock and an idle spin lock) the guess is marked
    /// ([`ObjectInfo::kind_certain`]): [`inspect_as`](Self::inspect_as) settles it.
    ///
    /// One script call reads the object's keys (one slot on a cluster); the wake-up channel's
    /// subscribers and the owners' records are read next, in parallel.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = ferrisson_testkit::RedisServer::spawn();
    /// use ferrisson_core::{Client, ClientConfig, ObjectKind};
    ///
    /// let client = Client::with_config(
    ///     ClientConfig::new(server.url()).with_app_name("billing-closer"),
    /// ).await?;
    /// # let owner = client.new_owner();
    /// # let mut con = redis::Client::open(server.url())?.get_multiplexed_async_connection().await?;
    /// # let _: () = redis::cmd("HSET").arg("billing:close").arg(owner.as_str()).arg(1).query_async(&mut con).await?;
    /// # let _: () = redis::cmd("PEXPIRE").arg("billing:close").arg(30_000).query_async(&mut con).await?;
    /// # client.refresh_record().await?;
    /// let info = client.inspect("billing:close").await?;
    /// assert_eq!(info.kind, Some(ObjectKind::Lock));
    /// let holder = &info.holders[0];
    /// assert!(holder.party.describe().starts_with("billing-closer on "));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] when the key holds data of no synchronizer (a hash of other
    /// fields, a list, …), [`Error::InvalidArgument`] for an empty name, and Redis errors.
    pub async fn inspect(&self, name: &str) -> Result<ObjectInfo> {
        self.inspect_key(self.object_key(name)?, None).await
    }

    /// As [`inspect`](Self::inspect), for an object the caller knows the kind of.
    ///
    /// # Errors
    ///
    /// As [`inspect`](Self::inspect), and [`Error::WrongType`] when the key holds another
    /// kind's layout (a hash where a semaphore's count would be, say).
    pub async fn inspect_as(&self, name: &str, kind: ObjectKind) -> Result<ObjectInfo> {
        self.inspect_key(self.object_key(name)?, Some(kind)).await
    }

    async fn inspect_key(&self, key: String, hint: Option<ObjectKind>) -> Result<ObjectInfo> {
        let call = ScriptCall::new(&INSPECT, &[&key]).arg(INSPECT_LIMIT);
        let reply: Vec<Vec<String>> = self.eval_read(&call).await.map_err(|e| match e {
            Error::Redis(e) => crate::error::map_redis_error(e, &key),
            e => e,
        })?;
        let facts = Facts::parse(reply);
        let detected = facts.kind(&key)?;
        let (kind, certain) = match (hint, detected) {
            (Some(hint), Some((found, _))) => {
                let fits = match found {
                    // A bare count: a semaphore, a latch armed by Redisson, or an expirable
                    // semaphore with no permit taken (its set of taken permits goes with the
                    // last one).
                    ObjectKind::Semaphore => matches!(
                        hint,
                        ObjectKind::Semaphore
                            | ObjectKind::CountDownLatch
                            | ObjectKind::ExpirableSemaphore
                    ),
                    ObjectKind::Lock => matches!(
                        hint,
                        ObjectKind::Lock | ObjectKind::SpinLock | ObjectKind::FairLock
                    ),
                    ObjectKind::SpinLock | ObjectKind::FairLock => {
                        matches!(hint, ObjectKind::Lock) || hint == found
                    }
                    found => hint == found,
                };
                if !fits {
                    return Err(Error::InvalidArgument(format!(
                        "`{key}` holds {} {found}, not {} {hint}",
                        found.article(),
                        hint.article()
                    )));
                }
                (Some(hint), true)
            }
            // Nothing stored: nothing to say of any kind.
            (Some(_), None) | (None, None) => (None, true),
            (None, Some((found, certain))) => (Some(found), certain),
        };
        let namespace = self.config().namespace();
        let name = key.strip_prefix(namespace).unwrap_or(&key).to_owned();
        let mut info = ObjectInfo {
            name,
            key: key.clone(),
            kind,
            kind_certain: certain,
            ttl: positive_ms(facts.pttl),
            holders: Vec::new(),
            waiters: Vec::new(),
            queue_length: facts.queue_length.unwrap_or(0),
            subscribers: None,
            fencing_token: None,
            permits: None,
            latch: None,
            rate: None,
            read_at: UNIX_EPOCH + Duration::from_millis(facts.now),
        };
        let Some(kind) = kind else {
            return Ok(info);
        };
        if kind.is_hash() != (facts.main_type == "hash") && facts.main_type != "none" {
            return Err(Error::WrongType { key });
        }
        let now = facts.now;
        let mut tags: Vec<u64> = Vec::new();
        let mut tag_of = |s: &str| {
            if let Some(t) = owner_tag(s)
                && !tags.contains(&t)
            {
                tags.push(t);
            }
        };
        let lease = positive_ms(facts.pttl);
        match kind {
            ObjectKind::Lock | ObjectKind::FairLock | ObjectKind::SpinLock => {
                for (owner, count) in &facts.fields {
                    tag_of(owner);
                    info.holders.push(Holder {
                        owner: owner.clone(),
                        mode: HoldMode::Exclusive,
                        count: count.parse().unwrap_or(0),
                        lease_left: lease,
                        party: Party::Unknown,
                    });
                }
            }
            ObjectKind::ReadWriteLock => {
                for (field, count) in &facts.fields {
                    if field == "mode" {
                        continue;
                    }
                    let (owner, mode, lease_left) = match field.strip_suffix(":write") {
                        Some(owner) => (owner.to_owned(), HoldMode::Write, lease),
                        None => (
                            field.clone(),
                            HoldMode::Read,
                            facts.read_leases.get(field).copied().and_then(positive_ms),
                        ),
                    };
                    tag_of(&owner);
                    info.holders.push(Holder {
                        owner,
                        mode,
                        count: count.parse().unwrap_or(0),
                        lease_left,
                        party: Party::Unknown,
                    });
                }
            }
            ObjectKind::Mutex => {
                if let Some(owner) = &facts.value {
                    tag_of(owner);
                    info.holders.push(Holder {
                        owner: owner.clone(),
                        mode: HoldMode::Exclusive,
                        count: 1,
                        lease_left: lease,
                        party: Party::Unknown,
                    });
                }
            }
            _ => {}
        }
        info.holders.sort_by(|a, b| a.owner.cmp(&b.owner));
        info.fencing_token = match kind {
            ObjectKind::Mutex => facts.mutex_token.as_deref(),
            k if k.is_lock() => facts.token.as_deref(),
            _ => None,
        }
        .and_then(|t| t.parse().ok());
        if kind == ObjectKind::FairLock || kind == ObjectKind::Lock {
            for (place, (owner, timeout, alive)) in facts.queued.iter().enumerate() {
                tag_of(owner);
                info.waiters.push(Waiter {
                    owner: owner.clone(),
                    place,
                    timeout_in: until(timeout, now),
                    alive_for: until(alive, now),
                    party: Party::Unknown,
                });
            }
        }
        if let Some((value, _)) = &facts.reserved {
            // "<since>|<at>|<owner>"
            if let Some(owner) = value.splitn(3, '|').nth(2) {
                tag_of(owner);
                info.waiters.push(Waiter {
                    owner: owner.to_owned(),
                    place: 0,
                    timeout_in: None,
                    alive_for: positive_ms(facts.reserved.as_ref().map_or(0, |r| r.1)),
                    party: Party::Unknown,
                });
            }
        }
        let count = facts
            .value
            .as_deref()
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or(0);
        match kind {
            ObjectKind::Semaphore | ObjectKind::ExpirableSemaphore => {
                let (taken, expired) = facts.permits_taken.unwrap_or((0, 0));
                let permits = facts
                    .permits
                    .iter()
                    .map(|(id, expiry)| {
                        tag_of(id);
                        TakenPermit {
                            id: id.clone(),
                            // Expiries are stored a millisecond late (protocol.md, "the
                            // extra millisecond"): the lease is that much less.
                            lease_left: match expiry.parse::<u64>() {
                                Ok(NO_LEASE_SCORE) => None,
                                _ => until(expiry, now)
                                    .map(|l| l.saturating_sub(Duration::from_millis(1))),
                            },
                            party: Party::Unknown,
                        }
                    })
                    .collect();
                info.permits = Some(PermitState {
                    available: count.saturating_add(i64::try_from(expired).unwrap_or(0)),
                    taken: (kind == ObjectKind::ExpirableSemaphore).then_some(taken),
                    permits,
                    reserved_for: facts
                        .reservation
                        .as_ref()
                        .and_then(|(v, pttl)| positive_ms(*pttl).map(|left| (v.clone(), left))),
                });
            }
            ObjectKind::CountDownLatch => {
                let mut participants = facts.participant.clone();
                participants.sort();
                info.latch = Some(LatchState {
                    count: count.max(0),
                    participant_count: facts.participants.unwrap_or(0),
                    participants,
                });
            }
            ObjectKind::RateLimiter => {
                let num = |f: &str| facts.field(f).and_then(|v| v.parse::<i64>().ok());
                let (value, given, _, oldest) = facts.window.clone().unwrap_or_default();
                let interval = num("interval").unwrap_or(0);
                info.rate = Some(RateState {
                    rate: num("rate").unwrap_or(0),
                    interval: Duration::from_millis(u64::try_from(interval).unwrap_or(0)),
                    per_client: per_client_of(&facts),
                    keep_alive: num("keepAliveTime").and_then(positive_ms),
                    // As of now: the stored value is as of the last call, and the permits
                    // given more than an interval ago have come back since.
                    available: available_now(&value, num("rate"), given, per_client_of(&facts)),
                    given_in_window: given,
                    next_return_in: oldest
                        .parse::<i64>()
                        .ok()
                        .map(|at| at.saturating_add(interval).to_string())
                        .and_then(|at| until(&at, now)),
                });
            }
            _ => {}
        }
        let (subscribers, records) =
            futures::join!(self.subscribers(kind, &key), self.client_records(&tags));
        info.subscribers = subscribers;
        let records = records?;
        let party = |tag: Option<u64>, owner: &str| match tag.and_then(|t| records.get(&t)) {
            Some(record) => Party::Ferrisson(record.clone()),
            None => match client_tag(owner) {
                Some(_) => Party::Unrecorded {
                    client_id: owner.get(..36).unwrap_or(owner).to_owned(),
                },
                None => Party::Unknown,
            },
        };
        for h in &mut info.holders {
            h.party = party(owner_tag(&h.owner), &h.owner);
        }
        for w in &mut info.waiters {
            w.party = party(owner_tag(&w.owner), &w.owner);
        }
        if let Some(p) = &mut info.permits {
            for permit in &mut p.permits {
                permit.party = match owner_tag(&permit.id).and_then(|t| records.get(&t)) {
                    Some(record) => Party::Ferrisson(record.clone()),
                    None => Party::Unknown,
                };
            }
        }
        Ok(info)
    }

    /// The number of connections subscribed to `kind`'s wake-up channel for `key`, `None`
    /// when the kind has none or the server did not answer.
    async fn subscribers(&self, kind: ObjectKind, key: &str) -> Option<u64> {
        let channel = wake_channel(kind, key)?;
        let sub = match self.config().publish_command() {
            crate::config::PublishCommand::Spublish => "SHARDNUMSUB",
            _ => "NUMSUB",
        };
        let reply: Value = self
            .query(redis::cmd("PUBSUB").arg(sub).arg(&channel))
            .await
            .map_err(|e| tracing::debug!(error = %e, "PUBSUB {sub} failed"))
            .ok()?;
        let count = |v: &Value| redis::from_redis_value_ref::<u64>(v).ok();
        match &reply {
            Value::Array(items) => items.get(1).and_then(count),
            Value::Map(pairs) => pairs.first().and_then(|(_, v)| count(v)),
            _ => None,
        }
    }

    /// The records of the clients tagged `tags`, those that exist.
    async fn client_records(&self, tags: &[u64]) -> Result<HashMap<u64, ClientRecord>> {
        let reads = tags.iter().map(|&tag| async move {
            let key = record_key(tag);
            let (hgetall, pttl) = (
                redis::cmd("HGETALL").arg(&key).clone(),
                redis::cmd("PTTL").arg(&key).clone(),
            );
            // Both at once: the multiplexed connection sends them in one write, one round trip.
            let (fields, pttl): (Result<HashMap<String, String>>, Result<i64>) =
                futures::join!(self.query(&hgetall), self.query(&pttl));
            (tag, fields, pttl)
        });
        let mut out = HashMap::new();
        for (tag, fields, pttl) in futures::future::join_all(reads).await {
            let fields = match fields {
                Ok(f) => f,
                // Someone else's key of another type under the name: no record.
                Err(Error::Redis(e)) if e.code() == Some("WRONGTYPE") => continue,
                Err(e) => return Err(e),
            };
            if let Some(record) = record_of(fields, pttl.unwrap_or(-2)) {
                out.insert(tag, record);
            }
        }
        Ok(out)
    }

    /// The record of the client with id `client_id` (a UUID, or an owner `<id>:<n>`), if it
    /// keeps one.
    ///
    /// # Errors
    ///
    /// Redis errors.
    pub async fn client_record(&self, client_id: &str) -> Result<Option<ClientRecord>> {
        let Some(tag) = client_tag(client_id) else {
            return Ok(None);
        };
        Ok(self.client_records(&[tag]).await?.remove(&tag))
    }

    /// Writes the client's record now (it is also written at connect and every watchdog
    /// period while the client lives): after a `FLUSHALL`, say, or in a test.
    ///
    /// # Errors
    ///
    /// Redis errors; [`Error::InvalidArgument`] when records are off.
    pub async fn refresh_record(&self) -> Result<()> {
        if !self.config().client_record() {
            return Err(Error::InvalidArgument(
                "the client keeps no record (ClientConfig::with_client_record(false))".into(),
            ));
        }
        let call = self.inner.identity.record_call(self.config().lease());
        let _: i64 = self.eval_read(&call).await?;
        Ok(())
    }

    /// Every synchronizer object whose key matches `pattern` (glob-style, as `SCAN MATCH`
    /// takes it; the client's namespace is put before it), found with `SCAN … TYPE` on the
    /// server (on every primary of a cluster), a page at a time: memory stays bounded
    /// however many keys there are. Keys a synchronizer derives from its name (queues, leases
    /// of read holds, tokens, records, …) and keys of other data are left out; a plain
    /// integer string shows as a semaphore whose kind is not certain.
    ///
    /// Read-only, like [`inspect`](Self::inspect), which reads each object found.
    pub fn list_objects(&self, pattern: &str) -> impl Stream<Item = Result<ObjectInfo>> + '_ {
        let pattern = format!("{}{pattern}", self.config().namespace());
        let scan = futures::stream::once(self.inner.conn.scan_nodes())
            .map(move |nodes| match nodes {
                Ok(nodes) => scan_keys(self, nodes, pattern.clone()).boxed(),
                Err(e) => futures::stream::once(async move { Err(Error::Redis(e)) }).boxed(),
            })
            .flatten();
        scan.map(move |key| async move {
            match key {
                Ok(key) => match self.inspect_key(key, None).await {
                    Ok(info) if info.kind.is_some() && listed(&info) => Some(Ok(info)),
                    Ok(_) | Err(Error::WrongType { .. }) => None,
                    Err(e) => Some(Err(e)),
                },
                Err(e) => Some(Err(e)),
            }
        })
        .buffered(16)
        .filter_map(futures::future::ready)
    }
}

/// Whether a listing shows an object: not a string of any content that merely could be a
/// mutex's token.
fn listed(info: &ObjectInfo) -> bool {
    info.kind != Some(ObjectKind::Mutex) || info.kind_certain
}

/// The suffixes of the keys synchronizers derive with `suffixed(name, …)`.
const DERIVED: [&str; 13] = [
    "value",
    "permits",
    "next",
    "intent",
    "round",
    "record",
    "count_latch",
    "timeout",
    "alive",
    "counted",
    "completed",
    "epoch",
    "undone",
];

/// Whether `key` is one a synchronizer derives from another's name rather than a main key.
pub(crate) fn is_derived(key: &str) -> bool {
    if key.starts_with("redisson_") || key.starts_with("ferrisson_") {
        return true;
    }
    if key.contains(":rwlock_timeout:") || key.starts_with(RECORD_PREFIX) {
        return true;
    }
    match key.rfind("}:") {
        Some(at) => {
            let rest = &key[at + 2..];
            let first = rest.split(':').next().unwrap_or_default();
            DERIVED.contains(&first)
        }
        None => false,
    }
}

/// The keys matching `pattern` of the types synchronizers use, node by node, page by page.
fn scan_keys<'a>(
    client: &'a Client,
    nodes: Vec<crate::connection::Node>,
    pattern: String,
) -> impl Stream<Item = Result<String>> + 'a {
    let passes: Vec<(crate::connection::Node, &'static str)> = nodes
        .into_iter()
        .flat_map(|n| [(n.clone(), "hash"), (n, "string")])
        .collect();
    futures::stream::iter(passes)
        .map(move |(node, kind)| {
            let pattern = pattern.clone();
            futures::stream::unfold(Some(0u64), move |cursor| {
                let (node, pattern) = (node.clone(), pattern.clone());
                async move {
                    let cursor = cursor?;
                    let cmd = redis::cmd("SCAN")
                        .arg(cursor)
                        .arg("MATCH")
                        .arg(&pattern)
                        .arg("COUNT")
                        .arg(500)
                        .arg("TYPE")
                        .arg(kind)
                        .clone();
                    match client.inner.conn.query_node(&cmd, &node).await {
                        Ok(reply) => match redis::from_redis_value::<(u64, Vec<String>)>(reply) {
                            Ok((next, keys)) => {
                                let keys: Vec<Result<String>> = keys
                                    .into_iter()
                                    .filter(|k| !is_derived(k))
                                    .map(Ok)
                                    .collect();
                                Some((keys, (next != 0).then_some(next)))
                            }
                            Err(e) => Some((vec![Err(Error::Protocol(e.to_string()))], None)),
                        },
                        Err(e) => Some((vec![Err(Error::Redis(e))], None)),
                    }
                }
            })
            .flat_map(futures::stream::iter)
        })
        .flatten()
}

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
            "{orders}:7c9e6679-7425-40de-944b-e07fc1f90ae7:1:rwlock_timeout:1",
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
