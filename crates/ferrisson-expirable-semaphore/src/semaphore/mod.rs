//! The permit-expirable semaphore.

use std::sync::Arc;
use std::time::Duration;

use ferrisson_core::__engine::keys::suffixed;
use ferrisson_core::__engine::permits::{
    CountChange, PermitArg, PermitAsk, PermitScripts, PermitsMade, SemaphoreNames, take,
};
use ferrisson_core::__engine::{
    CleanupGuard, ClientEngine, Grant, Instant, LeaseEnd, LeaseHandle, LeaseSpec,
    MAX_HANDOFF_STREAK, Need, Release, Released, ScriptCall, Taken, Takes,
};
use ferrisson_core::{AcquireOptions, Client, Error, Hold, HoldGuard, Owner, Result};

use crate::scripts::{ACQUIRE, HAND_OFF, RELEASE, RENEW, STATE, UNDO_ACQUIRE};

/// A permit-expirable distributed semaphore with Redisson's `RPermitExpirableSemaphore`
/// semantics and Redis layout.
///
/// Every permit taken has an id (32 hex characters) and a lease. Taken with a fixed lease, it
/// returns to the pool when the lease runs out, released or not. Taken without one
/// (**\[ext\]**), the client's watchdog renews it while the process lives, and the [`Permit`]
/// carries the same loss signal as a lock guard: a live worker keeps its permit, a dead one's
/// comes back within one lease (30 s by default), and a worker whose permit could not be kept
/// is told before the lease can have run out.
///
/// Waiting works as for the plain semaphore: woken by the release message, bounded by the
/// nearest permit expiry, and the oldest waiting call for several permits reserves what it
/// needs so that callers taking one at a time cannot starve it. A [`Permit`] released (or
/// dropped) while a call of the same client waits for one permit goes straight to that call
/// (**\[ext\]**): one script call swaps the released id for a new one with the waiter's lease, no
/// message, no contest; at most 8 in a row between public releases, so that waiters of other
/// clients and Redisson get their turn. Every acquisition still gets an id of its own.
///
/// **Coming from Redisson** ([`docs/redisson.md`](https://github.com/ferrisson/ferrisson/blob/main/docs/redisson.md)): [`set_permits`](Self::set_permits) sets the
/// total as `setPermits` does (free = total − taken, below zero when more are taken);
/// `getPermits` is [`total_permits`](Self::total_permits); `tryRelease(ids)` is
/// [`try_release_many`](Self::try_release_many) (how many were held) and `release(ids)` is
/// [`release_all`](Self::release_all) (all or nothing); a waiting multi-permit acquire
/// reserves free permits (**\[ext\]**), which Redisson's does not; zero permits succeed at
/// once.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = ferrisson_testkit::RedisServer::spawn();
/// # let client = ferrisson_core::Client::connect(&server.url()).await?;
/// use std::time::Duration;
/// use ferrisson_expirable_semaphore::{AcquireOptions, ExpirableSemaphore};
///
/// let semaphore = ExpirableSemaphore::new(&client, "renders")?;
/// semaphore.try_set_permits(2).await?;
/// let kept = semaphore.acquire().await?; // renewed by the watchdog
/// let short = semaphore
///     .acquire_with(AcquireOptions::new().with_lease(Duration::from_millis(100)))
///     .await?;
/// assert_eq!(semaphore.available_permits().await?, 0);
/// // The fixed lease runs out and its permit comes back by itself. The holder is told
/// // first (before the lease can have run out on the server), the count shows it just after.
/// short.lost().await;
/// tokio::time::timeout(Duration::from_secs(5), async {
///     while semaphore.available_permits().await? == 0 {
///         tokio::time::sleep(Duration::from_millis(10)).await;
///     }
///     Ok::<_, ferrisson_core::Error>(())
/// })
/// .await??;
/// assert_eq!(semaphore.available_permits().await?, 1);
/// semaphore.release(kept.id()).await?;
/// # drop(kept);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct ExpirableSemaphore {
    shared: Arc<Shared>,
    /// The configured limit ([`with_limit`](Self::with_limit)).
    limit: Option<u32>,
}

impl std::fmt::Debug for ExpirableSemaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExpirableSemaphore")
            .field("key", &self.shared.key)
            .field("limit", &self.limit)
            .finish()
    }
}

struct Shared {
    names: Arc<SemaphoreNames>,
    /// The taken permits (id → expiry), `suffixed(key, "timeout")`.
    timeouts: Arc<str>,
    /// The client's tag, the first 64 bits of every permit id it makes **\[ext\]**, so that an
    /// operator finds the client's record from a permit (`Client::inspect`).
    tag: u64,
}

impl Shared {
    /// A new permit id (or a try's id seed): the client's tag, then 64 random bits.
    fn fresh_id_seed(&self) -> u128 {
        (u128::from(self.tag) << 64) | (SemaphoreNames::random_bits() & u128::from(u64::MAX))
    }
}

impl std::ops::Deref for Shared {
    type Target = SemaphoreNames;

    fn deref(&self) -> &SemaphoreNames {
        &self.names
    }
}

mod acquire;
mod permit;

use acquire::*;
pub use permit::Permit;
use permit::*;

impl ExpirableSemaphore {
    /// A handle to the semaphore named `name` (after the client's namespace prefix).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when `name` is empty.
    pub fn new(client: &Client, name: &str) -> Result<Self> {
        let names = SemaphoreNames::new(client, name)?;
        Ok(Self {
            shared: Arc::new(Shared {
                timeouts: suffixed(&names.key, "timeout").into(),
                tag: ferrisson_core::__engine::identity::client_tag(client.id())
                    .unwrap_or_default(),
                names: Arc::new(names),
            }),
            limit: None,
        })
    }

    /// This semaphore with a limit of `limit` permits (**\[ext\]**): the count survives Redis
    /// losing it. An acquire that finds no count (never set, or lost in a restart without
    /// persistence, a `FLUSHALL`, a failover) sets it to the limit less the permits still held
    /// (none, when everything was lost). Without a limit, a call that waits on a missing count
    /// fails with [`Error::NotSetUp`] instead of waiting for ever. (Releases need no cap here:
    /// a permit lost with the data is not held, so giving it back adds nothing.) Every handle of
    /// one semaphore should use the same limit.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = ferrisson_testkit::RedisServer::spawn();
    /// # let client = ferrisson_core::Client::connect(&server.url()).await?;
    /// use ferrisson_expirable_semaphore::ExpirableSemaphore;
    ///
    /// let api_calls = ExpirableSemaphore::new(&client, "partner-api")?.with_limit(3)?;
    /// let permit = api_calls.acquire().await?;
    /// assert_eq!(api_calls.available_permits().await?, 2);
    /// permit.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a limit of 0.
    pub fn with_limit(&self, limit: u32) -> Result<Self> {
        if limit == 0 {
            return Err(Error::InvalidArgument(
                "a semaphore's limit needs at least one permit, got 0".into(),
            ));
        }
        Ok(Self {
            shared: self.shared.clone(),
            limit: Some(limit),
        })
    }

    /// The configured limit, if any ([`with_limit`](Self::with_limit)).
    pub fn limit(&self) -> Option<u32> {
        self.limit
    }

    /// The Redis key of the count.
    pub fn key(&self) -> &str {
        &self.shared.names.key
    }

    /// Sets the count of free permits to `permits` if no count is set yet (the first instance
    /// to start wins); returns whether it did.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] when the key holds something else than a count, [`Error::Redis`].
    pub async fn try_set_permits(&self, permits: u32) -> Result<bool> {
        Ok(self
            .shared
            .names
            .change(CountChange::TrySet(permits))
            .await?
            .0)
    }

    /// Sets the semaphore's total to `permits` (Redisson's `setPermits`): the free permits
    /// become `permits` less those taken now (expired ones returned first), below zero when
    /// more are taken, and waiters are woken. With 5 permits of which 3 are taken,
    /// `set_permits(3)` leaves none free, and `set_permits(2)` then leaves -1: the next permit
    /// released does not free one yet. (The plain semaphore's `set_permits` sets the free
    /// count: it keeps no record of what is taken.)
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = ferrisson_testkit::RedisServer::spawn();
    /// # let client = ferrisson_core::Client::connect(&server.url()).await?;
    /// use ferrisson_expirable_semaphore::ExpirableSemaphore;
    ///
    /// let semaphore = ExpirableSemaphore::new(&client, "api-slots")?;
    /// semaphore.try_set_permits(5).await?;
    /// let taken = semaphore.acquire_many(3).await?;
    /// semaphore.set_permits(2).await?;
    /// assert_eq!(semaphore.total_permits().await?, 2);
    /// assert_eq!(semaphore.available_permits().await?, -1);
    /// assert_eq!(semaphore.acquired_permits().await?, 3);
    /// # drop(taken);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`try_set_permits`](Self::try_set_permits).
    pub async fn set_permits(&self, permits: u32) -> Result<()> {
        let shared = &self.shared;
        shared
            .names
            .set_total(&shared.timeouts, permits)
            .await
            .map(drop)
    }

    /// Adds `delta` free permits (negative: takes them away, below zero if need be, without
    /// waiting) and returns the new count. Zero changes nothing.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when `delta`, or the count after, lies beyond
    /// ±[`MAX_PERMITS`](ferrisson_core::__engine::permits::MAX_PERMITS) (2^53 − 1, the integers
    /// the scripts count exactly; nothing changes), and as
    /// [`try_set_permits`](Self::try_set_permits).
    pub async fn add_permits(&self, delta: i64) -> Result<i64> {
        Ok(self.shared.names.change(CountChange::Add(delta)).await?.1)
    }

    /// `(free, taken, remaining lease of id)`, expired permits returned first.
    async fn state(&self, id: &str) -> Result<(i64, i64, i64)> {
        let shared = &self.shared;
        let call = ScriptCall::new(&STATE, &[&shared.key, &shared.timeouts, &shared.channel])
            .arg(shared.client.config().publish_command().as_str())
            .arg(id);
        // Every run returns expired permits and reads: as good as one, no settling needed.
        let reply: Vec<i64> = shared.client.eval_read(&call).await?;
        match reply.as_slice() {
            [free, taken, left] => Ok((*free, *taken, *left)),
            other => Err(Error::Protocol(format!(
                "expirable_semaphore/state replied {other:?}"
            ))),
        }
    }

    /// The permits free now (expired ones returned first).
    ///
    /// # Errors
    ///
    /// As [`try_set_permits`](Self::try_set_permits).
    pub async fn available_permits(&self) -> Result<i64> {
        Ok(self.state("").await?.0)
    }

    /// The permits taken and not expired.
    ///
    /// # Errors
    ///
    /// As [`try_set_permits`](Self::try_set_permits).
    pub async fn acquired_permits(&self) -> Result<i64> {
        Ok(self.state("").await?.1)
    }

    /// Free plus taken permits.
    ///
    /// # Errors
    ///
    /// As [`try_set_permits`](Self::try_set_permits).
    pub async fn total_permits(&self) -> Result<i64> {
        let (free, taken, _) = self.state("").await?;
        Ok(free + taken)
    }

    /// The time left on permit `id`'s lease; `None` when it is not held (unknown, released or
    /// expired). A permit without lease (taken by Redisson without one) reports `Duration::MAX`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a malformed id, and as
    /// [`try_set_permits`](Self::try_set_permits).
    pub async fn remaining_lease(&self, id: &str) -> Result<Option<Duration>> {
        check_id(id)?;
        let (_, _, left) = self.state(id).await?;
        Ok(match left {
            -1 => Some(Duration::MAX),
            ms => u64::try_from(ms).ok().map(Duration::from_millis),
        })
    }

    /// Sets permit `id`'s lease to `lease` from now; `false` when it is not held (an expired
    /// permit is never revived).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a malformed id or a lease under one millisecond,
    /// [`Error::Redis`].
    pub async fn update_lease(&self, id: &str, lease: Duration) -> Result<bool> {
        check_id(id)?;
        check_lease(Some(lease))?;
        renew_one(&self.shared, id, lease).await
    }

    /// Releases permit `id` (taken by any client), waking a waiter.
    ///
    /// # Errors
    ///
    /// [`Error::NotOwner`] when the id is not held (unknown, already released or expired),
    /// [`Error::InvalidArgument`] for a malformed id, [`Error::Redis`].
    pub async fn release(&self, id: &str) -> Result<()> {
        self.release_all(&[id]).await
    }

    /// As [`release`](Self::release); `Ok(false)` instead of an error when the id is not held.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a malformed id, [`Error::Redis`].
    pub async fn try_release(&self, id: &str) -> Result<bool> {
        match self.release(id).await {
            Ok(()) => Ok(true),
            Err(Error::NotOwner(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Releases each permit of `ids` that is held (unknown, released and expired ids are
    /// skipped) and returns how many it released (Redisson's `tryRelease(ids)`); waiters are
    /// woken for them. The all-or-nothing release of a list: [`release_all`](Self::release_all).
    ///
    /// # Cancel safety
    ///
    /// One script call, resent after a lost reply under one record slot and number (counted once); a
    /// dropped call may or may not have released the permits.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a malformed id or an empty list (nothing is sent),
    /// [`Error::Redis`].
    pub async fn try_release_many(&self, ids: &[&str]) -> Result<usize> {
        if ids.is_empty() {
            return Err(Error::InvalidArgument("no permit ids to release".into()));
        }
        for id in ids {
            check_id(id)?;
        }
        let released = release_ids(&self.shared, ids, ReleaseMode::Held).await?;
        usize::try_from(released).map_err(|_| {
            Error::Protocol(format!(
                "expirable_semaphore/release replied {released} for a release of the held ids"
            ))
        })
    }

    /// Releases every permit of `ids`, or none of them when one is not held.
    ///
    /// # Errors
    ///
    /// [`Error::NotOwner`] naming the first id not held (nothing was released),
    /// [`Error::InvalidArgument`] for a malformed id or an empty list, [`Error::Redis`].
    pub async fn release_all(&self, ids: &[&str]) -> Result<()> {
        if ids.is_empty() {
            return Err(Error::InvalidArgument("no permit ids to release".into()));
        }
        for id in ids {
            check_id(id)?;
        }
        let count = release_ids(&self.shared, ids, ReleaseMode::All).await?;
        if count < 0 {
            let missing = usize::try_from(-count - 1)
                .ok()
                .and_then(|i| ids.get(i))
                .copied()
                .unwrap_or_default();
            return Err(Error::NotOwner(format!(
                "permit {missing} of `{}` is not held (unknown, released or expired); nothing was released",
                self.shared.key
            )));
        }
        Ok(())
    }

    /// Takes one permit, waiting as long as it takes, kept by the watchdog while the process
    /// lives ([`acquire_with`](Self::acquire_with) for a fixed lease or a wait limit).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, and nothing leaks: dropped while an acquire call may have run, the
    /// permits it may have taken are given back (once) by a call that follows it on the same
    /// connection; dropped while waiting, the caller's reservation goes at once.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] at once, with nothing taken, for more permits than the
    /// semaphore has in all (its [`with_limit`](Self::with_limit) limit, or its free and taken
    /// permits together): a wait for them would never end, [`Error::WrongType`] when the key holds something else than a count,
    /// [`Error::Unreachable`] when Redis cannot be reached (at the first try, or for longer than
    /// the client's outage limit while waiting), [`Error::Closed`] once the client is shut
    /// down.
    pub async fn acquire(&self) -> Result<Permit> {
        self.acquire_with(AcquireOptions::new()).await
    }

    /// Takes a permit kept alive by the watchdog, runs `work` while it is held, releases it,
    /// and returns the work's output (see [`HoldGuard::run`]): a loss of the permit cuts the
    /// work off with [`Error::LeaseLost`].
    ///
    /// ```no_run
    /// # async fn demo(limit: ferrisson_expirable_semaphore::ExpirableSemaphore) -> ferrisson_expirable_semaphore::Result<()> {
    /// let status = limit
    ///     .with(|permit| async move {
    ///         permit.ensure_held()?; // the permit's lease still runs: call the partner API
    ///         Ok::<_, ferrisson_expirable_semaphore::Error>(200)
    ///     })
    ///     .await??;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire) while it waits; then as [`HoldGuard::run`].
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire), and [`Error::LeaseLost`].
    pub async fn with<F, Fut>(&self, work: F) -> Result<Fut::Output>
    where
        F: FnOnce(Hold) -> Fut,
        Fut: std::future::Future,
    {
        let guard = self.acquire().await?.guard;
        let hold = guard.hold();
        guard.run(work(hold)).await
    }

    /// Takes `n` permits at once, waiting as long as it takes, kept by the watchdog.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire). `n = 0` succeeds at once with no permits (Redisson's
    /// `acquire(0)`).
    pub async fn acquire_many(&self, n: u32) -> Result<Vec<Permit>> {
        self.acquire_many_with(n, AcquireOptions::new()).await
    }

    /// Takes one permit as the options say: a fixed lease (after which the permit returns to
    /// the pool; none: the watchdog keeps it), and a wait limit (none: as long as it takes).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire); [`Error::Timeout`] when the wait ran out;
    /// [`Error::InvalidArgument`] for a lease under one millisecond.
    pub async fn acquire_with(&self, options: AcquireOptions) -> Result<Permit> {
        one(self.acquire_many_with(1, options).await?)
    }

    /// Takes `n` permits at once as the options say ([`acquire_with`](Self::acquire_with)).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// # Errors
    ///
    /// As [`acquire_with`](Self::acquire_with). `n = 0` succeeds at once with no permits.
    pub async fn acquire_many_with(&self, n: u32, options: AcquireOptions) -> Result<Vec<Permit>> {
        let wait = options.wait();
        self.take(n, wait, options.lease())
            .await?
            .ok_or_else(|| match wait {
                Some(wait) => Error::Timeout(wait),
                None => Error::Protocol("an unbounded wait for permits ended without them".into()),
            })
    }

    /// Takes one permit if one is free right now, kept by the watchdog.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    pub async fn try_acquire(&self) -> Result<Option<Permit>> {
        self.try_acquire_with(AcquireOptions::new()).await
    }

    /// Takes `n` permits if that many are free right now, kept by the watchdog.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// # Errors
    ///
    /// As [`acquire_many`](Self::acquire_many).
    pub async fn try_acquire_many(&self, n: u32) -> Result<Option<Vec<Permit>>> {
        self.try_acquire_many_with(n, AcquireOptions::new()).await
    }

    /// Takes one permit, waiting up to the options' wait (none given: one try), with the
    /// options' lease (none: the watchdog keeps it); `Ok(None)` when none came in time.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// # Errors
    ///
    /// As [`acquire_with`](Self::acquire_with), but never [`Error::Timeout`].
    pub async fn try_acquire_with(&self, options: AcquireOptions) -> Result<Option<Permit>> {
        self.try_acquire_many_with(1, options)
            .await?
            .map(one)
            .transpose()
    }

    /// Takes `n` permits at once, waiting up to the options' wait (none given: one try).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// # Errors
    ///
    /// As [`try_acquire_with`](Self::try_acquire_with). `n = 0` succeeds at once with no
    /// permits (Redisson's `acquire(0)`).
    pub async fn try_acquire_many_with(
        &self,
        n: u32,
        options: AcquireOptions,
    ) -> Result<Option<Vec<Permit>>> {
        let wait = options.wait().unwrap_or(Duration::ZERO);
        self.take(n, Some(wait), options.lease()).await
    }

    async fn take(
        &self,
        n: u32,
        wait: Option<Duration>,
        lease: Option<Duration>,
    ) -> Result<Option<Vec<Permit>>> {
        check_lease(lease)?;
        if let Some(limit) = self.limit
            && n > limit
        {
            return Err(Error::InvalidArgument(format!(
                "{n} permits asked of `{}`, whose limit is {limit}: a wait for them would never end",
                self.shared.key
            )));
        }
        if n == 0 {
            // Zero permits are always there (Redisson's `acquire(0)`): no call, no ids.
            return Ok(Some(Vec::new()));
        }
        let shared = &self.shared;
        // A call for one permit can be handed a released one; calls for several take theirs
        // from Redis (a permit at a time would hold some while waiting for the rest).
        // The need names the handed permit's owner and lease.
        let need = (n == 1 && wait != Some(Duration::ZERO))
            .then(|| Need::permit(shared.client.new_owner(), lease));
        let ask = PermitAsk {
            names: shared.names.clone(),
            scripts: &SCRIPTS,
            n,
            lease_ms: ferrisson_core::__engine::time::millis(
                lease.unwrap_or(shared.client.config().lease()),
            ),
            limit: self.limit,
            seed_tag: shared.tag,
        };
        let Some(grant) = take(ask, wait, need).await? else {
            return Ok(None);
        };
        permits_of(shared, grant.accept(), lease)
            .map(Some)
            .ok_or_else(|| Error::Protocol("an acquire of permits took something else".into()))
    }
}
fn one(mut permits: Vec<Permit>) -> Result<Permit> {
    permits
        .pop()
        .ok_or_else(|| Error::Protocol("an acquire of one permit returned none".into()))
}

fn check_lease(lease: Option<Duration>) -> Result<()> {
    match lease {
        Some(lease) => ferrisson_core::duration::validate_lease("lease", lease),
        None => Ok(()),
    }
}

/// The semaphore's keys: the count, the permits taken and the waiting reservation **\[ext\]**
/// (an expiry and a delete cover all three, as Redisson's cover the first two). A delete sends
/// no message; holders of permits kept by the watchdog see the loss at their next renewal.
impl ferrisson_core::__engine::ObjectLayout for ExpirableSemaphore {
    fn object_keys(&self) -> ferrisson_core::__engine::ObjectKeys<'_> {
        let shared = &self.shared;
        ferrisson_core::__engine::ObjectKeys::new(
            &shared.client,
            ferrisson_core::__engine::KeyShape::Count,
            vec![&shared.key, &shared.timeouts, &shared.intent_key],
        )
    }
}
