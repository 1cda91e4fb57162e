//! What the two semaphores share: the permit count's changes, and a waiter's reservation.

use std::sync::Arc;

use crate::client::Client;
use crate::client::ClientEngine;
use crate::error::{Error, Result};
use crate::grant::{Grant, Taken, Takes};
use crate::pubsub::MAX_HANDOFF_STREAK;
use crate::script::{Script, ScriptCall};

/// Sets or changes a permit count and publishes it (`lua/core/permits_update.lua`).
pub(crate) static PERMITS_UPDATE: Script = Script::new(
    "core/permits_update",
    include_str!("../lua/permits_update.lua"),
);

/// Gives up a waiter's reservation (`lua/core/permits_leave.lua`).
pub(crate) static PERMITS_LEAVE: Script = Script::new(
    "core/permits_leave",
    include_str!("../lua/permits_leave.lua"),
);

/// The largest permit count (and change of one) the semaphores take: 2^53 - 1, the largest
/// integer Lua, and so every script, counts exactly.
pub const MAX_PERMITS: i64 = (1 << 53) - 1;

/// How a permit count changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CountChange {
    /// Set it, only when no count is set.
    TrySet(u32),
    /// Set it, only when no count is set, to expire after the time to live (validated by the
    /// caller).
    TrySetWithTtl(u32, std::time::Duration),
    /// Set it.
    Set(u32),
    /// Set the total of a permit-expirable semaphore: free permits become the total less the
    /// permits taken (below zero when more are taken), expired ones dropped first.
    SetTotal(u32),
    /// Add to it (negative: take away, below zero too).
    Add(i64),
}

/// Changes the permit count at `key`, publishing the new count on `channel`. Returns whether
/// it changed (`TrySet` finds a count set: no) and the count after.
///
/// Sent once, never retried: an `Add` whose reply was lost must not add twice.
///
/// # Errors
///
/// [`Error::WrongType`] when the key holds something else than a count, [`Error::Redis`].
/// `taken`: the permit-expirable semaphore's set of permits taken, which
/// [`CountChange::SetTotal`] needs (an error without it).
pub(crate) async fn change_permits(
    client: &Client,
    key: &str,
    channel: &str,
    taken: Option<&str>,
    change: CountChange,
) -> Result<(bool, i64)> {
    let (mode, value, ttl) = match change {
        CountChange::TrySet(n) => ("try_set", i64::from(n), 0),
        CountChange::TrySetWithTtl(n, ttl) => ("try_set", i64::from(n), crate::time::millis(ttl)),
        CountChange::Set(n) => ("set", i64::from(n), 0),
        CountChange::SetTotal(n) => ("set_total", i64::from(n), 0),
        CountChange::Add(n) => ("add", n, 0),
    };
    if let CountChange::Add(n) = change
        && !(-MAX_PERMITS..=MAX_PERMITS).contains(&n)
    {
        return Err(Error::InvalidArgument(format!(
            "a change of {n} permits to `{key}` is beyond +-{MAX_PERMITS}, the counts the scripts keep exact"
        )));
    }
    let mut keys = vec![key, channel];
    match (change, taken) {
        (CountChange::SetTotal(_), Some(taken)) => keys.push(taken),
        (CountChange::SetTotal(_), None) => {
            return Err(Error::Protocol(
                "a semaphore's total needs its set of permits taken".into(),
            ));
        }
        _ => {}
    }
    let call = ScriptCall::new(&PERMITS_UPDATE, &keys)
        .arg(mode)
        .arg(value)
        .arg(client.config().publish_command().as_str())
        .arg(ttl);
    let reply: Vec<i64> = client.eval_once(&call).await?;
    match reply.as_slice() {
        [2, count] => Err(Error::InvalidArgument(format!(
            "adding {value} permits to `{key}` ({count} now) would take the count beyond +-{MAX_PERMITS}, the counts the scripts keep exact: nothing changed"
        ))),
        [changed, count] => Ok((*changed == 1, *count)),
        other => Err(Error::Protocol(format!(
            "core/permits_update replied {other:?}"
        ))),
    }
}

/// The permit count at `key`: 0 when none is set.
///
/// # Errors
///
/// [`Error::WrongType`] when the key holds something else than a count, [`Error::Redis`].
pub async fn read_permits(client: &Client, key: &str) -> Result<i64> {
    let value: Option<String> = client.query(redis::cmd("GET").arg(key)).await?;
    match value {
        None => Ok(0),
        Some(v) => v.parse().map_err(|_| Error::WrongType {
            key: key.to_owned(),
        }),
    }
}

/// Gives up `waiter`'s reservation in `reservation` (if it holds it) and publishes the count on
/// `channel`, so that callers it held back try again. Failures are logged: the reservation then
/// expires by itself.
async fn leave_reservation(
    client: &Client,
    key: &str,
    channel: &str,
    reservation: &str,
    waiter: &str,
) {
    let call = ScriptCall::new(&PERMITS_LEAVE, &[key, channel, reservation])
        .arg(waiter)
        .arg(client.config().publish_command().as_str());
    if let Err(e) = client.eval::<i64>(&call).await {
        tracing::warn!(%key, error = %e, "giving up a reservation failed; it expires by itself");
    }
}

/// How long a waiter's reservation lasts unless its next try renews it.
pub(crate) const RESERVATION: std::time::Duration = std::time::Duration::from_secs(3);

/// How often the waiter holding the reservation tries again, renewing it.
pub(crate) const RESERVATION_RECHECK: std::time::Duration = std::time::Duration::from_secs(1);

/// The names a semaphore of either kind derives from its key, once, with its client.
#[derive(Debug)]
pub struct SemaphoreNames {
    /// The client the semaphore runs on.
    pub client: Client,
    /// The permit count (Redisson's key).
    pub key: String,
    /// Release messages, `prefixed("redisson_sc", key)`.
    pub channel: String,
    /// The oldest waiting call's reservation **\[ext\]**, `suffixed(key, "intent")`.
    pub intent_key: String,
    /// The client's record of its calls on the semaphore **\[ext\]**, which makes a resent
    /// acquire or release count once and an abandoned acquire undone once.
    pub record: crate::record::CallRecord,
}

impl SemaphoreNames {
    /// The names of the semaphore `name` (after the client's namespace prefix).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when `name` is empty.
    pub fn new(client: &Client, name: &str) -> Result<Self> {
        let key = client.object_key(name)?;
        Ok(Self {
            client: client.clone(),
            channel: crate::keys::prefixed("redisson_sc", &key),
            intent_key: crate::keys::suffixed(&key, "intent"),
            record: crate::record::CallRecord::new(client, &key),
            key,
        })
    }

    /// Changes the count as `change` says and publishes it: whether it changed and the count
    /// after (see [`change_permits`]).
    ///
    /// # Errors
    ///
    /// As [`change_permits`].
    pub async fn change(&self, change: CountChange) -> Result<(bool, i64)> {
        change_permits(&self.client, &self.key, &self.channel, None, change).await
    }

    /// Sets the total of a permit-expirable semaphore whose permits taken are in `taken`
    /// ([`CountChange::SetTotal`]); the free count after.
    ///
    /// # Errors
    ///
    /// As [`change_permits`].
    pub async fn set_total(&self, taken: &str, total: u32) -> Result<i64> {
        let change = CountChange::SetTotal(total);
        Ok(
            change_permits(&self.client, &self.key, &self.channel, Some(taken), change)
                .await?
                .1,
        )
    }

    /// Where the semaphore's waiters wait.
    fn keys(&self) -> PermitKeys<'_> {
        PermitKeys {
            key: &self.key,
            channel: &self.channel,
            reservation: &self.intent_key,
        }
    }

    /// A fresh id of 32 lowercase hex characters, random as a UUID v4: a waiting call's, or
    /// a permit's.
    pub fn random_id() -> String {
        format!("{:032x}", Self::random_bits())
    }

    /// 128 random bits, as a UUID v4 has (a permit id's, or the seed of a try's ids).
    pub fn random_bits() -> u128 {
        uuid::Uuid::new_v4().as_u128()
    }
}

/// One argument of a permit kind's acquire or undo script, which the engine fills in for each
/// try ([`PermitScripts`]): a kind says what its scripts take, and in which order, as data, so
/// that an acquire goes from the kind's public call to the connection in the core.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PermitArg {
    /// The permits asked for.
    Count,
    /// Each permit's lease, in ms ([`PermitAsk::lease_ms`]).
    Lease,
    /// The client's publish command (`PUBLISH`, or `SPUBLISH` on a cluster that shards them).
    Publish,
    /// The try's id seed, 16 raw bytes: [`PermitAsk::seed_tag`], then 64 random bits, fresh
    /// for each try.
    Seed,
    /// The client's id, 32 hex digits (its record and undone marks).
    Client,
    /// The try's slot, sequence number and flags in the client's record
    /// ([`RecordedCall::args_flagged`](crate::record::RecordedCall::args_flagged)).
    Record,
    /// The try's sequence number in the client's record, then `r` for a resend (else `""`).
    Sequence,
}

/// What a try whose script says "taken" took, as the engine hands it to the kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PermitsMade {
    /// Permits of a count ([`Taken::Permits`], with the count's epoch from the reply's fifth
    /// element).
    Counted,
    /// Permits under ids made from the try's seed ([`Taken::Seeded`]).
    Seeded,
}

/// A permit kind, as data: its name in spans and metrics, its acquire and undo scripts with
/// their arguments, and what a try takes. The engine ([`take`]) builds every try's calls from
/// it and never calls back into the kind's crate.
///
/// The engine reads the acquire script's reply as `{1, _, _, _, ..}` (taken),
/// `{0, _, reserved, hint}` (not taken; `reserved` 1 when this waiter holds the reservation,
/// `hint` > 0 the ms after which something may change) or `{2, _, _, _}` (no count is set and
/// the kind gave no limit to restore it to: [`Error::NotSetUp`] for a call that waits) or
/// `{3, total, _, _}` (more permits asked than there are in all: [`Error::InvalidArgument`]).
#[derive(Debug)]
pub struct PermitScripts {
    /// The kind's name in spans and metrics labels (`semaphore`, `expirable_semaphore`).
    pub kind: &'static str,
    /// The acquire script (its one key is the count).
    pub acquire: &'static Script,
    /// Its arguments, which the engine follows with the limit, the reservation's ms and the
    /// waiter's id, each only when needed (each argument costs Redis on every call).
    pub acquire_args: &'static [PermitArg],
    /// The script that gives back what a try whose caller left (or whose outcome stayed
    /// unknown) may have taken, latched by the try's slot in the record.
    pub undo: &'static Script,
    /// Its arguments, which the engine follows with the record's
    /// ([`RecordedCall::undo_args`](crate::record::RecordedCall::undo_args)).
    pub undo_args: &'static [PermitArg],
    /// What a try takes.
    pub made: PermitsMade,
}

/// One acquire call for permits ([`take`]): the semaphore, its kind's scripts and what the call
/// asks for.
#[derive(Debug, Clone)]
pub struct PermitAsk {
    /// The semaphore's names and client.
    pub names: Arc<SemaphoreNames>,
    /// The kind.
    pub scripts: &'static PermitScripts,
    /// How many permits.
    pub n: u32,
    /// Each permit's lease, in ms ([`PermitArg::Lease`]).
    pub lease_ms: u64,
    /// The semaphore's configured limit, which restores a lost count.
    pub limit: Option<u32>,
    /// The first 64 bits of every seed ([`PermitArg::Seed`]).
    pub seed_tag: u64,
}

/// The arguments of one acquire try.
#[derive(Debug, Clone, Copy)]
struct PermitTry<'a> {
    /// The waiting call's id (who holds the reservation).
    waiter: &'a str,
    /// This try in the client's record: a resent try takes its permits once, an undone one
    /// takes none.
    call: &'a crate::record::RecordedCall,
    /// Whether this call resends one whose reply was lost.
    resend: bool,
    /// How long the reservation the try may take lasts, in ms (0: the try does not reserve).
    reservation_ms: u64,
    /// The try's id seed ([`PermitArg::Seed`]).
    seed: u128,
}

impl PermitAsk {
    /// `scripts`' call with `args` filled in for the try `t`.
    fn call(&self, script: &'static Script, args: &[PermitArg], t: &PermitTry<'_>) -> ScriptCall {
        let names = &*self.names;
        let client = &names.client;
        let mut call = ScriptCall::new(script, &[&names.key]);
        for arg in args {
            call = match arg {
                PermitArg::Count => call.arg(self.n),
                PermitArg::Lease => call.arg(self.lease_ms),
                PermitArg::Publish => call.arg(client.config().publish_command().as_str()),
                PermitArg::Seed => call.arg(&t.seed.to_be_bytes()[..]),
                PermitArg::Client => call.arg(names.record.client_hex()),
                PermitArg::Record => t.call.args_flagged(call, client, t.resend, ""),
                PermitArg::Sequence => call.arg(t.call.seq).arg(if t.resend { "r" } else { "" }),
            };
        }
        call
    }

    /// The acquire call of the try `t`.
    fn try_call(&self, t: &PermitTry<'_>) -> ScriptCall {
        let scripts = self.scripts;
        let call = self.call(scripts.acquire, scripts.acquire_args, t);
        let limit = || self.limit.map(|l| l.to_string()).unwrap_or_default();
        // The rest only when needed: each argument costs Redis on every call.
        match (self.limit, t.reservation_ms) {
            (None, 0) => call,
            (_, 0) => call.arg(limit()),
            (_, ms) => call.arg(limit()).arg(ms).arg(t.waiter),
        }
    }

    /// The undo call of the try `t`.
    fn undo_call(&self, t: &PermitTry<'_>) -> ScriptCall {
        let call = self.call(self.scripts.undo, self.scripts.undo_args, t);
        t.call.undo_args(call, &self.names.client)
    }

    /// Sends the undo of the try (`recorded`, `seed`) of `waiter`, logging a failure as `what`.
    async fn undo(&self, waiter: &str, recorded: &crate::record::RecordedCall, seed: u128) {
        let t = PermitTry {
            waiter,
            call: recorded,
            resend: true,
            reservation_ms: 0,
            seed,
        };
        if let Err(e) = self.names.client.eval::<i64>(&self.undo_call(&t)).await {
            tracing::warn!(key = %self.names.key, n = self.n, error = %e, "giving back the permits of an abandoned acquire failed");
        }
    }
}

/// One waiting call for permits: its id, its tries, whether it holds the reservation.
struct Waiter<'a> {
    ask: &'a PermitAsk,
    id: String,
    tries: std::sync::atomic::AtomicU32,
    holds_reservation: std::sync::atomic::AtomicBool,
    waits: bool,
}

impl Waiter<'_> {
    /// One acquire try. If the caller drops it while the call may have run, or its outcome
    /// stays unknown, the undo call follows on the same connection (a try that took nothing
    /// makes it a no-op), and the reservation the try may have taken is given up.
    async fn attempt(&self) -> Result<crate::wait::Attempt<Grant>> {
        let client = &self.ask.names.client;
        crate::drive::retry_unreplicated(client, || self.attempt_once()).await
    }

    async fn attempt_once(&self) -> Result<crate::wait::Attempt<Grant>> {
        let ask = self.ask;
        let names = &*ask.names;
        let client = &names.client;
        let try_no = self
            .tries
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tracing::trace!(attempt = try_no.saturating_add(1), "try");
        // The try's slot in the record stays taken until the try is settled: the undo, if it
        // comes, keeps it until it has run.
        let recorded = Arc::new(names.record.start(client));
        // Only a call for several permits reserves: one permit at a time is served by the
        // release messages (and hand-offs) without the reservation's heartbeat.
        let reservation_ms = if self.waits && ask.n > 1 {
            crate::time::millis(RESERVATION)
        } else {
            0
        };
        let seed = match ask.scripts.made {
            PermitsMade::Seeded => {
                (u128::from(ask.seed_tag) << 64)
                    | (SemaphoreNames::random_bits() & u128::from(u64::MAX))
            }
            PermitsMade::Counted => 0,
        };
        let args = PermitTry {
            waiter: &self.id,
            call: &recorded,
            resend: false,
            reservation_ms,
            seed,
        };
        let undo = crate::guard::CleanupGuard::new(client, || {
            let (ask, recorded, waiter) = (ask.clone(), recorded.clone(), self.id.clone());
            async move {
                ask.undo(&waiter, &recorded, seed).await;
                // The try may have reserved permits for a caller that has gone.
                let keys = ask.names.keys();
                leave_reservation(
                    &ask.names.client,
                    keys.key,
                    keys.channel,
                    keys.reservation,
                    &waiter,
                )
                .await;
            }
        });
        let sent_at = tokio::time::Instant::now();
        // Not `eval`: an acquire the replicas did not acknowledge is rolled back below.
        let reply: Result<(redis::Value, Result<()>)> = Box::pin(client.settle(|attempt| {
            let call = ask.try_call(&PermitTry {
                resend: attempt > 0,
                ..args
            });
            async move { client.eval_once_synced(&call).await }
        }))
        .await;
        undo.settle(&reply);
        let (reply, synced) = reply?;
        let reply = try_reply(&reply)?;
        // Taken or not, the reply says whether this waiter holds the reservation now (a try
        // that took permits dropped it).
        self.holds_reservation.store(
            matches!(reply.as_slice(), [0, _, 1, _]),
            std::sync::atomic::Ordering::Release,
        );
        match reply.as_slice() {
            [1, _, _, _, ..] if synced.is_err() => {
                // Handed out only once the replicas have it: given back now, in a task of its
                // own, so that a caller leaving meanwhile does not stop it.
                let (ask, recorded, waiter) = (ask.clone(), recorded.clone(), self.id.clone());
                let undo = tokio::spawn(crate::replication::without_sync(async move {
                    ask.undo(&waiter, &recorded, seed).await;
                }));
                let _ = undo.await;
                synced.map(|()| crate::wait::Attempt::Held(0))
            }
            [1, left, _, _, ..] => {
                // More are left: local waiters that queued behind this one without a try of
                // their own look now.
                if let Ok(left) = usize::try_from(*left) {
                    client.hub().wake_local(names.keys().channel, left);
                }
                let taken = match ask.scripts.made {
                    PermitsMade::Counted => Taken::Permits {
                        count: ask.n,
                        epoch: Some(reply.get(4).copied().unwrap_or(0)),
                    },
                    PermitsMade::Seeded => Taken::Seeded {
                        seed,
                        count: ask.n,
                        sent_at,
                    },
                };
                // Until the kind makes its permits of it, what the try took is given back if
                // dropped: by the try's own undo, which its slot in the record latches.
                let (ask, waiter) = (ask.clone(), self.id.clone());
                Ok(crate::wait::Attempt::Acquired(Grant::new(
                    taken,
                    move |_| {
                        let client = ask.names.client.clone();
                        let undo = async move { ask.undo(&waiter, &recorded, seed).await };
                        if !client.spawn_cleanup(undo) {
                            tracing::warn!(
                                "permits taken by an acquire dropped outside a Tokio runtime were not given back"
                            );
                        }
                    },
                )))
            }
            // The reservation holder must come back before its reservation expires; a waiter
            // blocked by another's reservation alone is told when it ends; the others sleep
            // until a release (or a lease-long re-check) wakes them.
            [0, _, mine, hint] => Ok(not_taken(client, *mine == 1, *hint)),
            // No count set, and no limit to restore it to: a try that does not wait finds no
            // permit, as Redisson's would; a wait would never end.
            [2, _, _, _] if !self.waits => Ok(not_taken(client, false, -1)),
            [2, _, _, _] => Err(Error::NotSetUp(format!(
                "semaphore `{}` has no permit count (never set, or lost with Redis data), so a wait for permits would never end: set it (try_set_permits), or build the semaphore with a limit (with_limit), which restores a lost count",
                names.key
            ))),
            // More than there are in all: no release could ever make them free.
            [3, total, _, _] => Err(Error::InvalidArgument(format!(
                "{} permits asked of `{}`, which has {total} in all (free and taken): a wait for them would never end, and nothing was taken",
                ask.n, names.key
            ))),
            other => Err(Error::Protocol(format!(
                "the acquire script of `{}` replied {other:?}",
                names.key
            ))),
        }
    }
}

/// Takes the permits `ask` asks for: one try, then (when `wait` is not zero) the wait loop
/// until a try takes them, a local releaser hands them over (`need`: what the waiter tells it;
/// `None`: no hand-offs), or the wait ends; a wait that ends without them (deadline, error,
/// cancellation) gives up the waiter's reservation, and so does a hand-off received while the
/// waiter holds it. `wait`: `Some(zero)` tries once, `None` waits as long as it takes.
///
/// What was taken comes back as a [`Grant`]: [`Taken::Permits`] or [`Taken::Seeded`] from the
/// call's own try, what its need takes from a hand-off. The kind makes its permits of it; a
/// grant dropped unaccepted gives back what it holds.
///
/// # Errors
///
/// The errors of the tries (see [`wait_for_turn`](crate::wait::wait_for_turn)).
pub async fn take(
    ask: PermitAsk,
    wait: Option<std::time::Duration>,
    need: Option<crate::pubsub::Need>,
) -> Result<Option<Grant>> {
    let names = ask.names.clone();
    let what = crate::drive::Acquisition {
        client: &names.client,
        kind: ask.scripts.kind,
        key: &names.key,
        owner: None,
        permits: Some(ask.n),
        wait,
    };
    // Boxed, as the lock kinds' body is (`kind::acquire`): inline, it would double what a
    // waiter keeps while it waits.
    crate::drive::acquisition(what, |progress| async move {
        // A `dyn` future: the compiler then stops there when it checks that a caller's future
        // is `Send` (the whole type's depth overflowed its recursion limit in a caller's
        // spawned task).
        let inner: futures::future::BoxFuture<'_, _> =
            Box::pin(take_inner(&ask, wait, need, &progress));
        inner.await
    })
    .await
}

async fn take_inner(
    ask: &PermitAsk,
    wait: Option<std::time::Duration>,
    need: Option<crate::pubsub::Need>,
    progress: &crate::metrics::Progress,
) -> Result<Option<Grant>> {
    let names = &*ask.names;
    let client = &names.client;
    let keys = names.keys();
    let n = ask.n;
    let waiter = Waiter {
        ask,
        id: SemaphoreNames::random_id(),
        tries: std::sync::atomic::AtomicU32::new(0),
        holds_reservation: std::sync::atomic::AtomicBool::new(false),
        waits: wait != Some(std::time::Duration::ZERO),
    };
    let deadline = wait.and_then(crate::time::deadline_after);
    let spec = crate::wait::WaitSpec {
        channel: keys.channel,
        policy: crate::pubsub::permits_message_policy,
        deadline,
        // A safety net for lost messages; tries that know better say so (`not_taken`).
        recheck: crate::config::Backoff::fixed(client.config().lease()),
        need,
        interest: u64::MAX,
        armed: None,
    };
    let outcome = async {
        // Each try boxed, as the lock kinds' tries are: inline, a try's future (the script
        // call through the connection) would size the wait loop's state for the whole wait.
        let mut attempt = || Box::pin(waiter.attempt());
        // A call for one permit behind a local waiter for one whose try was in vain queues
        // behind it without a try (it would fail too, and it would barge in ahead of it).
        // Else, with other local waiters on the semaphore, the channel is subscribed already:
        // register before the first try (which the wait loop makes), and no try after
        // subscribing is needed.
        let behind = (waiter.waits && n == 1)
            .then(|| {
                client
                    .hub()
                    .subscribe_behind(keys.channel, || spec.need.clone(), &|need| need.count == 1)
            })
            .flatten();
        let early = match behind {
            Some(behind) => Some((behind, crate::wait::FirstRound::Sleep)),
            None => {
                match crate::wait::begin_wait(client, &spec, waiter.waits, &mut attempt).await? {
                    crate::wait::Start::Done(outcome) => return Ok(outcome),
                    crate::wait::Start::Wait(early) => {
                        early.map(|early| (early, crate::wait::FirstRound::FirstTry))
                    }
                }
            }
        };
        let reservation = crate::guard::CleanupGuard::new(client, || {
            let client = client.clone();
            let (key, channel) = (keys.key.to_owned(), keys.channel.to_owned());
            let (reservation, id) = (keys.reservation.to_owned(), waiter.id.clone());
            async move { leave_reservation(&client, &key, &channel, &reservation, &id).await }
        });
        crate::inspect::note_wait(
            progress,
            client,
            crate::waits::WaitFor {
                kind: ask.scripts.kind,
                key: &names.key,
                owner: None,
                permits: Some(n),
                limit: ask.limit,
            },
        );
        let early = early
            .as_ref()
            .map(|(subscription, first)| (subscription, *first));
        let outcome = crate::wait::wait_registered(client, early, spec, attempt, Some).await?;
        reservation.disarm();
        // A try that took permits dropped the reservation itself; a hand-off did not.
        if outcome.is_none()
            || waiter
                .holds_reservation
                .load(std::sync::atomic::Ordering::Acquire)
        {
            // Boxed: awaited inline, this call's future (2.4 KB) would size the whole state,
            // also while the waiter sleeps.
            Box::pin(leave_reservation(
                client,
                keys.key,
                keys.channel,
                keys.reservation,
                &waiter.id,
            ))
            .await;
        }
        Ok(outcome)
    }
    .await;
    progress.tries.store(
        waiter.tries.load(std::sync::atomic::Ordering::Relaxed),
        std::sync::atomic::Ordering::Relaxed,
    );
    outcome
}

/// Where a semaphore's waiters wait: its count, channel and reservation keys.
#[derive(Debug, Clone, Copy)]
struct PermitKeys<'a> {
    key: &'a str,
    channel: &'a str,
    reservation: &'a str,
}

/// What a failed try means for the wait, from the acquire script's reply: the reservation
/// holder comes back within [`RESERVATION_RECHECK`] to keep it; a waiter that knows when
/// something may change (`hint_ms > 0`) looks again then; the others wait for a release (or
/// a lease-long re-check).
fn not_taken<T>(client: &Client, holds_reservation: bool, hint_ms: i64) -> crate::wait::Attempt<T> {
    let ms = if holds_reservation {
        i64::try_from(crate::time::millis(RESERVATION_RECHECK)).unwrap_or(i64::MAX)
    } else if hint_ms > 0 {
        hint_ms
    } else {
        i64::try_from(crate::time::millis(client.config().lease())).unwrap_or(i64::MAX)
    };
    crate::wait::Attempt::Held(ms)
}

/// Hands `n` released permits of the count whose waiters wait on `channel` straight to the
/// client's own waiters, longest-waiting first, while each needs no more than is left
/// (**\[ext\]**: no round trip, no message; at most [`MAX_HANDOFF_STREAK`] in a row between two
/// public releases, so that waiters of other clients and Redisson get their turn). Returns the
/// permits left to release publicly. Permits handed off keep `epoch`: a stale one stays stale.
/// A waiter that leaves before it looks leaves its permits in its slot unaccepted: `undo`
/// gets them ([`Taken::Permits`]) and releases them.
pub fn hand_off_permits(
    client: &Client,
    channel: &str,
    mut n: u32,
    epoch: Option<i64>,
    undo: impl Fn(Taken) + Clone + Send + 'static,
) -> u32 {
    while n > 0 {
        let Some(claim) = client.claim_waiter(channel, Takes::Permits, MAX_HANDOFF_STREAK) else {
            break;
        };
        let need = claim.need().count;
        if need > n {
            // It needs more than this release frees: the public release wakes it (the claim,
            // dropped, frees it and wakes it to try again).
            break;
        }
        match claim.deliver(Grant::new(
            Taken::Permits { count: need, epoch },
            undo.clone(),
        )) {
            Ok(()) => n -= need,
            Err(unclaimed) => {
                // The waiter left meanwhile: these permits go back with the others.
                let _ = unclaimed.accept();
                break;
            }
        }
    }
    n
}

/// A permit try's reply as integers: the table the scripts answer, or an integer alone for
/// the hot path, a try that took its permits in epoch 0 (`{1, permits left, 0, 0, 0}`; an
/// integer costs Redis less than a table: 0.6 µs of a semaphore's 11 µs pair).
fn try_reply(reply: &redis::Value) -> Result<Vec<i64>> {
    match reply {
        redis::Value::Int(left) => Ok(vec![1, *left, 0, 0, 0]),
        _ => redis::FromRedisValue::from_redis_value_ref(reply)
            .map_err(|e| crate::Error::Protocol(e.to_string())),
    }
}
