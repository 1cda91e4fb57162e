//! Leases and the watchdog: one per client, renewing every hold of that client by batches.
//!
//! # Implementation details
//!
//! Every hold a synchronizer takes is registered as a *lease entry*, keyed by (renewal script,
//! key, owner) and reference-counted by the holds (guards) that share it: a reentrant lock held
//! three times by one task is one entry with three holds. Each entry knows its *deadline*: the
//! send time of the last command that set its TTL (the acquire, or the last successful
//! renewal) plus the lease. The server received that command after it was sent, so the server's
//! expiry is never earlier than the deadline: a loss signalled at the deadline comes before the
//! lease can have expired on the server.
//!
//! Entries whose holds asked for the watchdog are renewed every `period` (a third of the lease
//! by default). Due entries are grouped by renewal script and lease and sent as one script call
//! per batch of up to [`BATCH`] keys, whose reply says, key by key, whether the owner still
//! holds it. The calls run in their own tasks, so a slow call never delays the deadline check of
//! another entry. An entry is lost when
//!
//! - a renewal reaches Redis and Redis answers that the owner no longer holds the key
//!   ([`LossReason::NotHeld`]: deleted, expired, force-unlocked, lost in a restart);
//! - its deadline passes while renewals fail or go unanswered ([`LossReason::RenewalFailed`]);
//!   failed renewals are retried every `period / 5` until then;
//! - its deadline passes with no failure seen: the watchdog itself ran too late, the process
//!   or runtime stalled ([`LossReason::Stalled`]);
//! - it holds a fixed lease and the lease ran out ([`LossReason::LeaseExpired`]).
//!
//! A lost entry leaves the table, so a later acquisition starts a fresh entry; the guards of
//! the lost one keep their signal.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use rustc_hash::FxHashMap;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::connection::Connection;
use crate::error::LossReason;
use crate::replication::{Replication, Synced};
use crate::script::{Script, ScriptCall};

/// Most keys renewed by one script call.
pub const BATCH: usize = 256;

/// What a synchronizer registers when it takes a hold.
///
/// The renewal `script` must take `KEYS[i]` = a key, `ARGV[1]` = the lease in milliseconds,
/// `ARGV[i + 1]` = the owner argument of `KEYS[i]`, extend each key the owner still holds, and
/// return an array with `1` (renewed) or `0` (not held) per key.
#[derive(Debug, Clone)]
pub struct LeaseSpec {
    /// The batch renewal script.
    pub script: &'static Script,
    /// The key holding the hold (shared, so that registering a hold copies no string).
    pub key: Arc<str>,
    /// The owner argument the renewal script receives for this key.
    pub owner: Arc<str>,
    /// The lease the acquisition set.
    pub lease: Duration,
    /// Whether the watchdog renews the hold (false: a fixed lease that simply runs out).
    pub renew: bool,
    /// When the command that set the lease was sent.
    pub sent_at: Instant,
}

/// What the client knows locally about the holds of one (script, key, owner).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseState {
    /// Live holds (guards) on the entry.
    pub holds: u32,
    /// Whether the watchdog renews the entry.
    pub renewing: bool,
    /// The lease of the entry.
    pub lease: Duration,
}

type EntryKey = (&'static str, Arc<str>, Arc<str>);

struct Entry {
    id: u64,
    script: &'static Script,
    lease: Duration,
    holds: u32,
    renewing: bool,
    deadline: Instant,
    next_renew: Instant,
    in_flight: bool,
    last_failed: bool,
    /// The last renewal the primary answered went unacknowledged by its replicas.
    unreplicated: bool,
    lost: Arc<LossSignal>,
}

/// The loss signal of one entry, shared with the handles of its holds: set once, never reset.
#[derive(Default)]
struct LossSignal {
    reason: OnceLock<LossReason>,
    raised: Notify,
}

impl LossSignal {
    fn reason(&self) -> Option<LossReason> {
        self.reason.get().copied()
    }

    fn raise(&self, reason: LossReason) {
        if self.reason.set(reason).is_ok() {
            self.raised.notify_waiters();
        }
    }

    async fn wait(&self) -> LossReason {
        loop {
            let raised = self.raised.notified();
            let mut raised = std::pin::pin!(raised);
            // Registered before the check: a loss raised in between still wakes this wait.
            raised.as_mut().enable();
            if let Some(reason) = self.reason() {
                return reason;
            }
            raised.await;
        }
    }
}

#[derive(Default)]
struct WatchdogState {
    /// Keyed by short strings of our own making; Fx hashing is the cheap part of a hold.
    entries: FxHashMap<EntryKey, Entry>,
    next_id: u64,
    closed: bool,
    renew_calls: u64,
    /// When the watchdog task will wake next on its own (`None`: not before a kick).
    scheduled: Option<Instant>,
}

pub(crate) struct WatchdogShared {
    state: Mutex<WatchdogState>,
    kick: Notify,
    conn: Connection,
    replication: Arc<Replication>,
    period: Duration,
    response_timeout: Duration,
}

impl WatchdogShared {
    fn state(&self) -> MutexGuard<'_, WatchdogState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes the task wake by `at`: kicks it (after letting go of `state`) only when it would
    /// otherwise wake later.
    fn wake_by(&self, mut state: MutexGuard<'_, WatchdogState>, at: Instant) {
        let kick = state.scheduled.is_none_or(|scheduled| at < scheduled);
        if kick {
            state.scheduled = Some(at);
        }
        drop(state);
        if kick {
            self.kick.notify_one();
        }
    }
}

/// The client's lease table and the task that renews it.
pub(crate) struct Watchdog {
    shared: Arc<WatchdogShared>,
}

impl Watchdog {
    pub(crate) fn start(
        conn: Connection,
        replication: Arc<Replication>,
        period: Duration,
        response_timeout: Duration,
    ) -> Self {
        let shared = Arc::new(WatchdogShared {
            state: Mutex::new(WatchdogState::default()),
            kick: Notify::new(),
            conn,
            replication,
            period,
            response_timeout,
        });
        tokio::spawn(run(shared.clone()));
        Self { shared }
    }

    pub(crate) fn hold(&self, spec: LeaseSpec) -> LeaseHandle {
        // The server got the lease in whole milliseconds (`time::millis` truncates): a
        // deadline from the `Duration` asked for could lie past the server's expiry.
        let spec = LeaseSpec {
            lease: crate::time::whole_millis(spec.lease),
            ..spec
        };
        let mut state = self.shared.state();
        let closed = state.closed;
        state.next_id += 1;
        let fresh_id = state.next_id;
        let key = (spec.script.name(), spec.key, spec.owner);
        let period = self.shared.period;
        let expiry = crate::time::later(spec.sent_at, spec.lease);
        let entry = state.entries.entry(key.clone()).or_insert_with(|| Entry {
            id: fresh_id,
            script: spec.script,
            lease: spec.lease,
            holds: 0,
            renewing: spec.renew,
            deadline: expiry,
            next_renew: spec.sent_at + period,
            in_flight: false,
            last_failed: false,
            unreplicated: false,
            lost: Arc::default(),
        });
        if entry.holds > 0 {
            // The acquisition reset the TTL to `spec.lease` when it ran.
            if entry.renewing || spec.renew {
                entry.deadline = entry.deadline.max(expiry);
            } else {
                entry.deadline = expiry;
            }
            if spec.renew && !entry.renewing {
                entry.renewing = true;
                entry.next_renew = spec.sent_at + period;
            }
            entry.lease = spec.lease;
        }
        entry.holds += 1;
        let handle = LeaseHandle {
            watch: LeaseWatch {
                shared: self.shared.clone(),
                key: key.clone(),
                id: entry.id,
                lost: entry.lost.clone(),
            },
            renewing: entry.renewing,
            ended: false,
        };
        // The client was shut down meanwhile: nobody renews or watches the hold any more.
        let now = Instant::now();
        if closed {
            if let Some(entry) = state.entries.remove(&key) {
                signal_loss(&key, &entry, LossReason::ClientShutDown, now);
            }
            return handle;
        }
        // The reply came so late that the lease had already run out on the server: the hold
        // is lost from the start, and the guard says why.
        if entry.holds == 1 && expiry <= now {
            let reason = if entry.renewing {
                LossReason::ExpiredInFlight
            } else {
                LossReason::LeaseExpired
            };
            if let Some(entry) = state.entries.remove(&key) {
                signal_loss(&key, &entry, reason, now);
            }
            return handle;
        }
        let wake = if entry.renewing {
            entry.next_renew.min(entry.deadline)
        } else {
            entry.deadline
        };
        // Wake the task only when this entry needs it sooner than it will wake anyway: on a
        // busy client, holds come and go far more often than renewals are due.
        self.shared.wake_by(state, wake);
        handle
    }

    pub(crate) fn state(
        &self,
        script: &Script,
        key: &Arc<str>,
        owner: &Arc<str>,
    ) -> Option<LeaseState> {
        let state = self.shared.state();
        state
            .entries
            .get(&(script.name(), key.clone(), owner.clone()))
            .map(|e| LeaseState {
                holds: e.holds,
                renewing: e.renewing,
                lease: e.lease,
            })
    }

    pub(crate) fn renew_calls(&self) -> u64 {
        self.shared.state().renew_calls
    }

    /// Stops the watchdog for good (the client shuts down): every hold still registered is
    /// lost ([`LossReason::ClientShutDown`]), and no renewal is sent any more.
    pub(crate) fn shut_down(&self) {
        let mut state = self.shared.state();
        state.closed = true;
        let entries = std::mem::take(&mut state.entries);
        drop(state);
        self.shared.kick.notify_one();
        let now = Instant::now();
        for (key, entry) in entries {
            signal_loss(&key, &entry, LossReason::ClientShutDown, now);
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.shared.state().closed = true;
        self.shared.kick.notify_one();
    }
}

/// One hold's registration with the watchdog, and its loss signal. Dropping it ends the hold
/// locally (the watchdog stops renewing once the entry has no holds left).
pub struct LeaseHandle {
    /// Which hold of the table this is, and its loss signal.
    watch: LeaseWatch,
    renewing: bool,
    ended: bool,
}

/// How a hold stood when it ended locally (`LeaseHandle::end`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseEnd {
    /// Why the hold had been lost, if it had.
    pub lost: Option<LossReason>,
    /// Whether it was the last local hold of its entry (the owner holds nothing more).
    pub last_hold: bool,
    /// Whether the watchdog renewed it.
    pub renewed: bool,
}

impl std::fmt::Debug for LeaseHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseHandle")
            .field("key", &self.watch.key.1)
            .field("owner", &self.watch.key.2)
            .field("renewing", &self.renewing)
            .field("lost", &self.watch.lost.reason())
            .finish()
    }
}

/// One hold's loss as its [`LeaseHandle`] tells it ([`LeaseHandle::watch`]), for as long as
/// it is kept: cloned freely, and dropping it ends nothing.
#[derive(Clone)]
pub struct LeaseWatch {
    shared: Arc<WatchdogShared>,
    key: EntryKey,
    id: u64,
    lost: Arc<LossSignal>,
}

impl std::fmt::Debug for LeaseWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseWatch")
            .field("key", &self.key.1)
            .field("lost", &self.lost.reason())
            .finish()
    }
}

impl LeaseWatch {
    /// As [`LeaseHandle::lost_reason`].
    pub fn lost_reason(&self) -> Option<LossReason> {
        if let Some(reason) = self.lost.reason() {
            return Some(reason);
        }
        let now = Instant::now();
        let mut state = self.shared.state();
        let overdue = state
            .entries
            .get(&self.key)
            .is_some_and(|e| e.id == self.id && e.deadline <= now);
        if overdue && let Some(entry) = state.entries.remove(&self.key) {
            signal_loss(&self.key, &entry, loss_reason_at_deadline(&entry), now);
        }
        drop(state);
        self.lost.reason()
    }

    /// As [`LeaseHandle::lost_owned`].
    pub fn lost_owned(&self) -> impl Future<Output = LossReason> + Send + 'static {
        let signal = self.lost.clone();
        async move { signal.wait().await }
    }
}

impl LeaseHandle {
    /// Why the hold was lost, or `None` while it is believed held.
    ///
    /// This does not wait for the watchdog: a hold whose deadline has passed counts as lost
    /// right away, so a holder checking after a stall (when the watchdog has not run yet) is
    /// told the truth.
    pub fn lost_reason(&self) -> Option<LossReason> {
        self.watch.lost_reason()
    }

    /// A look at this hold's loss that borrows nothing and ends nothing when dropped (what
    /// scoped work's [`Hold`](crate::Hold) keeps).
    pub fn watch(&self) -> LeaseWatch {
        self.watch.clone()
    }

    /// Resolves when the hold is lost, with the reason. Pending for as long as it is held.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only observes.
    pub async fn lost(&self) -> LossReason {
        self.watch.lost.wait().await
    }

    /// As [`lost`](Self::lost), as a future that borrows nothing (for a task of its own).
    pub fn lost_owned(&self) -> impl Future<Output = LossReason> + Send + 'static {
        self.watch.lost_owned()
    }

    /// Ends this hold locally (as dropping it does) and says, in one look at the table, how it
    /// stood: why it was lost (if it was), and whether it was the entry's last hold.
    pub fn end(mut self) -> LeaseEnd {
        let renewed = self.renewing;
        let now = Instant::now();
        let mut state = self.watch.shared.state();
        let mut last = false;
        if let Some(entry) = state
            .entries
            .get_mut(&self.watch.key)
            .filter(|e| e.id == self.watch.id)
        {
            if entry.deadline <= now {
                let reason = loss_reason_at_deadline(entry);
                if let Some(entry) = state.entries.remove(&self.watch.key) {
                    signal_loss(&self.watch.key, &entry, reason, now);
                }
            } else {
                entry.holds = entry.holds.saturating_sub(1);
                last = entry.holds == 0;
                if last {
                    state.entries.remove(&self.watch.key);
                }
            }
        }
        drop(state);
        self.ended = true;
        LeaseEnd {
            lost: self.watch.lost.reason(),
            last_hold: last,
            renewed,
        }
    }

    /// Records that a call sent at `sent_at` set (`earlier_only`: may set) this hold's lease
    /// to `lease` on the server (an extension of a fixed lease): its deadline moves to
    /// `sent_at + lease`, earlier or later (`earlier_only`: only earlier, for a call whose
    /// outcome is not known yet). `false` when the hold is no longer in the table (lost,
    /// ended): nothing changes.
    pub(crate) fn extended(&self, sent_at: Instant, lease: Duration, earlier_only: bool) -> bool {
        let lease = crate::time::whole_millis(lease);
        let deadline = crate::time::later(sent_at, lease);
        let mut state = self.watch.shared.state();
        let Some(entry) = state
            .entries
            .get_mut(&self.watch.key)
            .filter(|e| e.id == self.watch.id && !e.renewing)
        else {
            return false;
        };
        if earlier_only && deadline >= entry.deadline {
            return true;
        }
        entry.deadline = deadline;
        if !earlier_only {
            entry.lease = lease;
        }
        self.watch.shared.wake_by(state, deadline);
        true
    }

    /// Marks this hold lost for `reason` (a call found it gone on the server) and ends its
    /// entry: every guard of it is told.
    pub(crate) fn found_lost(&self, reason: LossReason) {
        let mut state = self.watch.shared.state();
        let ours = state
            .entries
            .get(&self.watch.key)
            .is_some_and(|e| e.id == self.watch.id);
        let removed = if ours {
            state.entries.remove(&self.watch.key)
        } else {
            None
        };
        drop(state);
        match removed {
            Some(entry) => signal_loss(&self.watch.key, &entry, reason, Instant::now()),
            None => self.watch.lost.raise(reason),
        }
    }

    /// Whether the watchdog renews this hold.
    pub fn is_renewed(&self) -> bool {
        self.renewing
    }

    /// The earliest moment the lease can end on the server, as known now.
    pub fn deadline(&self) -> Option<Instant> {
        let state = self.watch.shared.state();
        state
            .entries
            .get(&self.watch.key)
            .filter(|e| e.id == self.watch.id)
            .map(|e| e.deadline)
    }
}

impl Drop for LeaseHandle {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        let mut state = self.watch.shared.state();
        if let Some(entry) = state.entries.get_mut(&self.watch.key)
            && entry.id == self.watch.id
        {
            entry.holds = entry.holds.saturating_sub(1);
            if entry.holds == 0 {
                state.entries.remove(&self.watch.key);
            }
        }
    }
}

struct Batch {
    script: &'static Script,
    lease: Duration,
    members: Vec<(EntryKey, u64)>,
    earliest_deadline: Instant,
}

async fn run(shared: Arc<WatchdogShared>) {
    let retry_interval =
        (shared.period / 5).clamp(Duration::from_millis(10), Duration::from_secs(1));
    loop {
        let now = Instant::now();
        let (batches, next_wake) = {
            let mut state = shared.state();
            if state.closed {
                return;
            }
            expire(&mut state, now);
            let batches = due_batches(&mut state, now, shared.conn.is_cluster());
            // With nothing to do, the task still wakes once a period: a hold taken meanwhile
            // is due no earlier than a period after it was taken, so taking it need not wake
            // the task (only a shorter fixed lease does).
            let next_wake = state
                .entries
                .values()
                .map(|e| {
                    if e.renewing && !e.in_flight {
                        e.next_renew.min(e.deadline)
                    } else {
                        e.deadline
                    }
                })
                .min()
                .unwrap_or(now + shared.period)
                .min(now + shared.period);
            state.renew_calls += batches.len() as u64;
            state.scheduled = Some(next_wake);
            (batches, next_wake)
        };
        for batch in batches {
            tokio::spawn(renew(shared.clone(), batch, retry_interval));
        }
        tokio::select! {
            () = tokio::time::sleep_until(next_wake) => {}
            () = shared.kick.notified() => {}
        }
    }
}

fn expire(state: &mut WatchdogState, now: Instant) {
    let lost: Vec<EntryKey> = state
        .entries
        .iter()
        .filter(|(_, e)| e.deadline <= now)
        .map(|(k, _)| k.clone())
        .collect();
    for key in lost {
        if let Some(entry) = state.entries.remove(&key) {
            signal_loss(&key, &entry, loss_reason_at_deadline(&entry), now);
        }
    }
}

/// Why an entry whose deadline passed is lost.
fn loss_reason_at_deadline(entry: &Entry) -> LossReason {
    if !entry.renewing {
        LossReason::LeaseExpired
    } else if entry.last_failed && entry.unreplicated {
        // Renewals reached the primary, but its replicas still have the old expiry.
        LossReason::NotReplicated
    } else if entry.last_failed || entry.in_flight {
        // The last renewal failed, or is still unanswered at the deadline.
        LossReason::RenewalFailed
    } else {
        // No renewal was even tried in time: the watchdog itself ran late.
        LossReason::Stalled
    }
}

fn signal_loss(key: &EntryKey, entry: &Entry, reason: LossReason, now: Instant) {
    if reason == LossReason::LeaseExpired {
        tracing::debug!(key = %key.1, owner = %key.2, "fixed lease ran out");
    } else {
        tracing::warn!(
            key = %key.1,
            owner = %key.2,
            late_ms = now.saturating_duration_since(entry.deadline).as_millis() as u64,
            %reason,
            "hold lost: the holder must stop relying on it"
        );
    }
    crate::metrics::lost(reason);
    entry.lost.raise(reason);
}

/// The entries due for renewal, in batches of one script and lease (and, on a cluster, one hash
/// slot: a script's keys must share one).
fn due_batches(state: &mut WatchdogState, now: Instant, per_slot: bool) -> Vec<Batch> {
    type Group = (&'static str, Duration, Option<u16>);
    let mut groups: HashMap<Group, Vec<Batch>> = HashMap::new();
    for (key, entry) in state.entries.iter_mut() {
        if !entry.renewing || entry.in_flight || entry.next_renew > now {
            continue;
        }
        entry.in_flight = true;
        let slot = per_slot.then(|| crate::keys::hash_slot(&key.1));
        let batches = groups
            .entry((entry.script.name(), entry.lease, slot))
            .or_default();
        if batches.last().is_none_or(|b| b.members.len() >= BATCH) {
            batches.push(Batch {
                script: entry.script,
                lease: entry.lease,
                members: Vec::new(),
                earliest_deadline: entry.deadline,
            });
        }
        if let Some(batch) = batches.last_mut() {
            batch.members.push((key.clone(), entry.id));
            batch.earliest_deadline = batch.earliest_deadline.min(entry.deadline);
        }
    }
    groups.into_values().flatten().collect()
}

async fn renew(shared: Arc<WatchdogShared>, batch: Batch, retry_interval: Duration) {
    let keys: Vec<&str> = batch
        .members
        .iter()
        .map(|((_, key, _), _)| &**key)
        .collect();
    let mut call = ScriptCall::new(batch.script, &keys).arg(crate::time::millis(batch.lease));
    for ((_, _, owner), _) in &batch.members {
        call = call.arg(&**owner);
    }
    let sent_at = Instant::now();
    let budget = shared
        .response_timeout
        .min(batch.earliest_deadline.saturating_duration_since(sent_at))
        .max(Duration::from_millis(1));
    // With replica sync on, the renewal and its WAIT go in one round trip (on a lane).
    let reply = tokio::time::timeout(budget, async {
        if shared.replication.enabled() {
            let (value, synced) = shared.replication.eval_synced(&call).await?;
            Ok((value, Some(synced)))
        } else {
            shared.conn.eval(&call).await.map(|value| (value, None))
        }
    })
    .await;
    let (results, synced): (Option<Vec<i64>>, _) = match reply {
        Ok(Ok((value, synced))) => match redis::from_redis_value::<Vec<i64>>(value) {
            Ok(v) if v.len() == batch.members.len() => (Some(v), synced),
            Ok(v) => {
                tracing::warn!(
                    expected = batch.members.len(),
                    got = v.len(),
                    "renewal reply of the wrong length"
                );
                (None, None)
            }
            Err(e) => {
                tracing::warn!(error = %e, "renewal reply not understood");
                (None, None)
            }
        },
        Ok(Err(e)) => {
            tracing::debug!(error = %e, keys = batch.members.len(), "renewal failed; retrying");
            (None, None)
        }
        Err(_) => {
            tracing::debug!(keys = batch.members.len(), "renewal timed out; retrying");
            (None, None)
        }
    };
    crate::metrics::renewed(results.is_none());
    // With replica sync on, a renewal counts only once the replicas have it: until then a
    // failover would bring back the old expiry.
    let unreplicated = synced
        .as_ref()
        .is_some_and(|s| !matches!(s, Ok(Synced::Yes | Synced::NotNeeded)));
    if unreplicated {
        tracing::debug!(keys = batch.members.len(), result = ?synced, "renewal not acknowledged by the replicas; retrying");
    }
    let now = Instant::now();
    let mut state = shared.state();
    for (i, (key, id)) in batch.members.iter().enumerate() {
        let Some(entry) = state.entries.get_mut(key).filter(|e| e.id == *id) else {
            continue;
        };
        entry.in_flight = false;
        match results.as_ref().and_then(|r| r.get(i).copied()) {
            Some(1) if unreplicated => {
                entry.last_failed = true;
                entry.unreplicated = true;
                entry.next_renew = now + retry_interval;
            }
            Some(1) => {
                entry.deadline = entry.deadline.max(crate::time::later(sent_at, batch.lease));
                entry.next_renew = sent_at + shared.period;
                entry.last_failed = false;
                entry.unreplicated = false;
            }
            Some(_) => {
                if let Some(entry) = state.entries.remove(key) {
                    signal_loss(key, &entry, LossReason::NotHeld, now);
                }
            }
            None => {
                // (`unreplicated` stays: the last renewal the primary answered still went
                // unacknowledged by the replicas, whatever became of this one.)
                entry.last_failed = true;
                entry.next_renew = now + retry_interval;
            }
        }
    }
    drop(state);
    shared.kick.notify_one();
}
