//! What the two semaphores share: the permit count's changes, and a waiter's reservation.

use std::sync::Arc;

use crate::client::Client;
use crate::client::ClientEngine;
use crate::error::{Error, Result};
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

/// The arguments of one acquire try of a permit kind ([`PermitKind::try_call`]).
#[derive(Debug, Clone, Copy)]
pub struct PermitTry<'a> {
    /// How many permits the call takes.
    pub n: u32,
    /// The waiting call's id (who holds the reservation).
    pub waiter: &'a str,
    /// This try in the client's record: a resent try takes its permits once, an undone one
    /// takes none.
    pub call: &'a crate::record::RecordedCall,
    /// Whether this call resends one whose reply was lost.
    pub resend: bool,
    /// How long the reservation the try may take lasts, in ms (0: the try does not reserve).
    pub reservation_ms: u64,
}

/// A semaphore kind, as [`take`] drives it: the plain semaphore and the permit-expirable one.
/// A value of it stands for one acquire call (what the call asked for beyond `n`, a lease for
/// example, lives in it).
///
/// The engine reads the acquire script's reply as `{1, _, _, _, ..}` (taken; the whole reply
/// goes to [`taken`](Self::taken)),
/// `{0, _, reserved, hint}` (not taken; `reserved` 1 when this waiter holds the reservation,
/// `hint` > 0 the ms after which something may change) or `{2, _, _, _}` (no count is set and
/// the kind gave no limit to restore it to: [`Error::NotSetUp`] for a call that waits) or
/// `{3, total, _, _}` (more permits asked than there are in all: [`Error::InvalidArgument`]).
pub trait PermitKind: Clone + Send + Sync + 'static {
    /// What a try prepares before its call and needs again to undo or to build its result
    /// (the permit ids of the expirable semaphore).
    type Ticket: Clone + Send + Sync + 'static;
    /// What a call that took its permits returns.
    type Taken: Send + 'static;

    /// The semaphore's names and client.
    fn names(&self) -> &SemaphoreNames;

    /// The kind's name in spans and metrics labels (`semaphore`, `expirable_semaphore`).
    fn kind_name(&self) -> &'static str {
        "semaphore"
    }

    /// What a try of `n` permits prepares.
    fn ticket(&self, n: u32) -> Self::Ticket;

    /// The acquire script call of a try.
    fn try_call(&self, args: &PermitTry<'_>, ticket: &Self::Ticket) -> ScriptCall;

    /// The script call that gives back what a try whose caller left (or whose outcome stayed
    /// unknown) may have taken, latched by the try's latch.
    fn undo_call(&self, args: &PermitTry<'_>, ticket: &Self::Ticket) -> ScriptCall;

    /// The permits a try took (its script replied `reply`), the call having been sent at
    /// `sent_at`.
    fn taken(
        &self,
        args: &PermitTry<'_>,
        ticket: Self::Ticket,
        reply: &[i64],
        sent_at: tokio::time::Instant,
    ) -> Self::Taken;

    /// What a local releaser handed this kind's waiter ([`Taken::Permits`] or
    /// [`Taken::Permit`], as its `Need::takes` says), as a call's result; `None` for anything
    /// else (never delivered: a claim checks what the waiter takes).
    ///
    /// [`Taken::Permits`]: crate::grant::Taken::Permits
    /// [`Taken::Permit`]: crate::grant::Taken::Permit
    fn granted(&self, taken: crate::grant::Taken) -> Option<Self::Taken>;
}

/// One waiting call for permits: its id, its tries, whether it holds the reservation.
struct Waiter<'a, K> {
    kind: &'a K,
    n: u32,
    id: String,
    tries: std::sync::atomic::AtomicU32,
    holds_reservation: std::sync::atomic::AtomicBool,
    waits: bool,
}

impl<K: PermitKind> Waiter<'_, K> {
    /// One acquire try. If the caller drops it while the call may have run, or its outcome
    /// stays unknown, the undo call follows on the same connection (a try that took nothing
    /// makes it a no-op), and the reservation the try may have taken is given up.
    async fn attempt(&self) -> Result<crate::wait::Attempt<K::Taken>> {
        let client = &self.kind.names().client;
        crate::drive::retry_unreplicated(client, || self.attempt_once()).await
    }

    async fn attempt_once(&self) -> Result<crate::wait::Attempt<K::Taken>> {
        let names = self.kind.names();
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
        let reservation_ms = if self.waits && self.n > 1 {
            crate::time::millis(RESERVATION)
        } else {
            0
        };
        let args = PermitTry {
            n: self.n,
            waiter: &self.id,
            call: &recorded,
            resend: false,
            reservation_ms,
        };
        let ticket = self.kind.ticket(self.n);
        let undo = crate::guard::CleanupGuard::new(client, || {
            let (kind, ticket, recorded) = (self.kind.clone(), ticket.clone(), recorded.clone());
            let (waiter, n) = (self.id.clone(), self.n);
            async move {
                let names = kind.names();
                let args = PermitTry {
                    n,
                    waiter: &waiter,
                    call: &recorded,
                    resend: true,
                    reservation_ms: 0,
                };
                let call = kind.undo_call(&args, &ticket);
                if let Err(e) = names.client.eval::<i64>(&call).await {
                    tracing::warn!(key = %names.key, n, error = %e, "giving back the permits of an abandoned acquire failed");
                }
                // The try may have reserved permits for a caller that has gone.
                let keys = names.keys();
                leave_reservation(
                    &names.client,
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
        let reply: Result<(Vec<i64>, Result<()>)> = Box::pin(client.settle(|attempt| {
            let call = self.kind.try_call(
                &PermitTry {
                    resend: attempt > 0,
                    ..args
                },
                &ticket,
            );
            async move { client.eval_once_synced(&call).await }
        }))
        .await;
        undo.settle(&reply);
        let (reply, synced) = reply?;
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
                let (kind, ticket, recorded) =
                    (self.kind.clone(), ticket.clone(), recorded.clone());
                let (waiter, n) = (self.id.clone(), self.n);
                let undo = tokio::spawn(crate::replication::without_sync(async move {
                    let names = kind.names();
                    let args = PermitTry {
                        n,
                        waiter: &waiter,
                        call: &recorded,
                        resend: true,
                        reservation_ms: 0,
                    };
                    if let Err(e) = names
                        .client
                        .eval::<i64>(&kind.undo_call(&args, &ticket))
                        .await
                    {
                        tracing::warn!(key = %names.key, n, error = %e, "giving back permits the replicas did not acknowledge failed");
                    }
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
                Ok(crate::wait::Attempt::Acquired(
                    self.kind.taken(&args, ticket, &reply, sent_at),
                ))
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
                self.n, names.key
            ))),
            other => Err(Error::Protocol(format!(
                "the acquire script of `{}` replied {other:?}",
                names.key
            ))),
        }
    }
}

/// Takes `n` permits of `kind`: one try, then (when `wait` is not zero) the wait loop until a
/// try takes them, a local releaser hands them over (`need`: what the waiter tells it;
/// `None`: no hand-offs), or the wait ends; a wait that ends without them (deadline, error,
/// cancellation) gives up the waiter's reservation, and so does a hand-off received while the
/// waiter holds it. `wait`: `Some(zero)` tries once, `None` waits as long as it takes.
///
/// # Errors
///
/// The errors of the tries (see [`wait_for_turn`](crate::wait::wait_for_turn)).
pub async fn take<K: PermitKind>(
    kind: &K,
    n: u32,
    wait: Option<std::time::Duration>,
    need: Option<crate::pubsub::Need>,
) -> Result<Option<K::Taken>> {
    let names = kind.names();
    let what = crate::drive::Acquisition {
        client: &names.client,
        kind: kind.kind_name(),
        key: &names.key,
        owner: None,
        permits: Some(n),
        wait,
    };
    // Boxed, as the lock kinds' body is (`kind::acquire`): inline, it would double what a
    // waiter keeps while it waits.
    crate::drive::acquisition(what, |progress| async move {
        // A `dyn` future: the compiler then stops there when it checks that a caller's future
        // is `Send` (the whole type's depth overflowed its recursion limit in a caller's
        // spawned task).
        let inner: futures::future::BoxFuture<'_, _> =
            Box::pin(take_inner(kind, n, wait, need, &progress));
        inner.await
    })
    .await
}

async fn take_inner<K: PermitKind>(
    kind: &K,
    n: u32,
    wait: Option<std::time::Duration>,
    need: Option<crate::pubsub::Need>,
    progress: &crate::metrics::Progress,
) -> Result<Option<K::Taken>> {
    let names = kind.names();
    let client = &names.client;
    let keys = names.keys();
    let waiter = Waiter {
        kind,
        n,
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
        progress
            .waited
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let early = early
            .as_ref()
            .map(|(subscription, first)| (subscription, *first));
        let outcome =
            crate::wait::wait_registered(client, early, spec, attempt, |taken| kind.granted(taken))
                .await?;
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
