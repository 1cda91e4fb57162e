//! The semaphore.

use std::sync::Arc;
use std::time::Duration;

use ferrisson_core::__engine::permits::{
    CountChange, PermitArg, PermitAsk, PermitScripts, PermitsMade, SemaphoreNames, read_permits,
    take,
};
use ferrisson_core::__engine::{
    ClientEngine, GiveBack, HoldTicket, Need, RecordedCall, ScriptCall, Taken, hand_off_permits,
    spawn_cleanup, wait_without_lease,
};
use ferrisson_core::{AcquireOptions, Client, Error, Hold, Result};
use futures::future::BoxFuture;

use crate::scripts::{ACQUIRE, DRAIN, RELEASE, UNDO_ACQUIRE};

/// A distributed semaphore with Redisson's `RSemaphore` semantics and Redis layout.
///
/// The count lives in Redis under the semaphore's name; [`try_set_permits`](Self::try_set_permits)
/// sets it once (the first instance to start wins), [`add_permits`](Self::add_permits) changes
/// it (below zero too: callers then wait until enough permits come back).
///
/// - **Waiting costs nothing while nothing changes.** Waiters sleep on the client's one
///   subscriber connection; a release of `k` permits wakes at most `k` local waiters. Each wait
///   is also bounded, so a lost message delays a waiter, never strands it.
/// - **A waiter for many permits is not starved** by callers taking one at a time: the oldest
///   waiting call for several permits reserves what it needs, and other calls may only take
///   the permits beyond that until it has them (**\[ext\]**: Redisson clients on the same name
///   do not honour the reservation).
/// - **Local hand-off** (**\[ext\]**): a release hands its permits straight to a waiter of the
///   same client, without a round trip or a message, at most 8 times in a row before a release
///   goes through Redis, so that waiters of other clients (and Redisson) get their turn.
/// - **Permits belong to nobody.** A process that dies holding permits does not give them
///   back; [`Permits`] gives them back when dropped, in a live process. For permits that come
///   back by themselves, use the permit-expirable semaphore.
/// - **Zero permits** are a no-op that succeeds: acquiring 0 returns at once with empty
///   [`Permits`], releasing 0 changes nothing (Redisson's and `tokio::sync`'s meaning).
/// - **Coming from Redisson** ([`docs/redisson.md`](https://github.com/ferrisson/ferrisson/blob/main/docs/redisson.md)): `trySetPermits(n, ttl)` is
///   [`try_set_permits_with_ttl`](Self::try_set_permits_with_ttl), `releaseIfExists` is
///   [`release_if_exists`](Self::release_if_exists), and
///   [`set_permits`](Self::set_permits) sets the *free* count (the layout keeps no record of
///   what is taken; the permit-expirable semaphore's sets the total); `delete`, `expire` and
///   the other `RExpirable` calls are the [`SyncObject`](ferrisson_core::SyncObject) trait's.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = ferrisson_testkit::RedisServer::spawn();
/// # let client = ferrisson_core::Client::connect(&server.url()).await?;
/// use ferrisson_semaphore::Semaphore;
///
/// let semaphore = Semaphore::new(&client, "exports")?;
/// assert!(semaphore.try_set_permits(2).await?);
/// assert!(!semaphore.try_set_permits(5).await?, "set once");
/// let two = semaphore.acquire_many(2).await?;
/// assert!(semaphore.try_acquire().await?.is_none());
/// two.release().await?;
/// assert_eq!(semaphore.available_permits().await?, 2);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Semaphore {
    shared: Arc<Shared>,
    /// The configured limit ([`with_limit`](Self::with_limit)).
    limit: Option<u32>,
}

impl std::fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Semaphore")
            .field("key", &self.shared.key)
            .field("limit", &self.limit)
            .finish()
    }
}

type Shared = SemaphoreNames;

/// Permits taken from a [`Semaphore`]: given back by [`release`](Self::release), or in the
/// background when dropped. A process about to end calls
/// [`Client::shutdown`](ferrisson_core::Client::shutdown) after dropping them: a runtime
/// ending with `main` would cut that release short, and a plain semaphore's permits never
/// come back by themselves.
#[must_use = "dropping the permits gives them back at once (in the background)"]
#[derive(Debug)]
pub struct Permits {
    semaphore: Semaphore,
    count: u32,
    held: bool,
    /// Their registration with the client, which a shutdown gives back while they live
    /// (`None`: zero permits).
    ticket: Option<HoldTicket>,
    /// The count's epoch when they were taken (0: before any restore), `None` when unknown
    /// (see [`Semaphore::with_limit`]).
    epoch: Option<i64>,
}

/// How a shutdown gives back permits whose `Permits` are still alive.
struct PermitsGiveBack {
    semaphore: Semaphore,
    count: u32,
    epoch: Option<i64>,
}

impl GiveBack for PermitsGiveBack {
    fn what(&self) -> String {
        format!(
            "{} semaphore permit(s) of `{}`",
            self.count, self.semaphore.shared.key
        )
    }

    fn give_back(self: Arc<Self>) -> BoxFuture<'static, Result<bool>> {
        Box::pin(async move {
            self.semaphore
                .release_from(self.count, self.epoch)
                .await
                .map(|()| true)
        })
    }

    fn held(&self) -> Option<ferrisson_core::__engine::Held> {
        Some(ferrisson_core::__engine::Held {
            kind: "semaphore",
            key: self.semaphore.shared.key.clone(),
            owner: None,
            permits: u64::from(self.count),
        })
    }
}

impl Permits {
    /// `count` permits taken (of the count's `epoch`), registered with the client so that a
    /// shutdown gives them back while they live.
    fn taken(semaphore: &Semaphore, count: u32, epoch: Option<i64>) -> Self {
        let ticket = semaphore
            .shared
            .client
            .register_hold(Arc::new(PermitsGiveBack {
                semaphore: semaphore.clone(),
                count,
                epoch,
            }));
        Self {
            semaphore: semaphore.clone(),
            count,
            held: true,
            ticket: Some(ticket),
            epoch,
        }
    }

    /// Whether these permits are still this value's to give back: not forgotten, released,
    /// or given back by the client's shutdown (which claims them first).
    fn claim(&mut self) -> bool {
        let held = std::mem::take(&mut self.held);
        let claimed = self.ticket.as_ref().is_none_or(HoldTicket::claim);
        held && claimed
    }

    /// How many permits these are.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Gives the permits back, waking up to that many waiters.
    ///
    /// # Cancel safety
    ///
    /// Dropping this future does not lose the release: one that may have been sent is sent
    /// again in the background with the same record slot and number (Redis counts it once).
    ///
    /// # Errors
    ///
    /// [`Error::Unreachable`] when Redis could not be reached: the permits are then lost to the
    /// count (see [`Semaphore::add_permits`] to restore them).
    pub async fn release(mut self) -> Result<()> {
        let shut_down = self.ticket.as_ref().is_some_and(HoldTicket::is_claimed);
        if !self.claim() {
            if shut_down {
                // The client's shutdown gave them back already.
                return Err(Error::LeaseLost(ferrisson_core::LossReason::ClientShutDown));
            }
            return Ok(());
        }
        self.semaphore.release_from(self.count, self.epoch).await
    }
}

impl Drop for Permits {
    fn drop(&mut self) {
        if !self.claim() {
            return;
        }
        let semaphore = self.semaphore.clone();
        let (count, epoch) = (self.count, self.epoch);
        let spawned = spawn_cleanup(&self.semaphore.shared.client, async move {
            if let Err(e) = semaphore.release_from(count, epoch).await {
                tracing::warn!(key = %semaphore.shared.key, count, error = %e, "giving permits back in the background failed");
            }
        });
        if !spawned {
            tracing::warn!(key = %self.semaphore.shared.key, count, "permits dropped outside a Tokio runtime are not given back");
        }
    }
}

fn positive(n: u32, what: &str) -> Result<()> {
    if n == 0 {
        return Err(Error::InvalidArgument(format!(
            "{what} needs at least one permit, got 0"
        )));
    }
    Ok(())
}

impl Semaphore {
    /// A handle to the semaphore named `name` (after the client's namespace prefix).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when `name` is empty.
    pub fn new(client: &Client, name: &str) -> Result<Self> {
        let names = SemaphoreNames::new(client, name)?;
        Ok(Self {
            shared: Arc::new(names),
            limit: None,
        })
    }

    /// This semaphore with a limit of `limit` permits (**\[ext\]**, as npm `redis-semaphore`
    /// takes one): the count survives Redis losing it. An acquire that finds no count (never
    /// set, or lost in a restart without persistence, a `FLUSHALL`, a failover) sets it to the
    /// limit, since no holder is known any more, and starts a new *epoch* (**\[ext\]**,
    /// `suffixed(name, "epoch")`): [`Permits`] taken before it give nothing back when released,
    /// since the restore counted them already. A release of permits of unknown origin
    /// ([`release`](Self::release), Redisson's) never raises the count above the limit.
    /// Without a limit, a call that waits on a missing count fails with
    /// [`Error::NotSetUp`] instead of waiting for ever. Every handle of one semaphore should
    /// use the same limit; [`add_permits`](Self::add_permits) and
    /// [`set_permits`](Self::set_permits) still change the count as asked.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = ferrisson_testkit::RedisServer::spawn();
    /// # let client = ferrisson_core::Client::connect(&server.url()).await?;
    /// use ferrisson_semaphore::Semaphore;
    ///
    /// // No try_set_permits needed: the first acquire sets the count to the limit.
    /// let api_calls = Semaphore::new(&client, "partner-api")?.with_limit(3)?;
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
        positive(limit, "a semaphore's limit")?;
        Ok(Self {
            shared: self.shared.clone(),
            limit: Some(limit),
        })
    }

    /// The configured limit, if any ([`with_limit`](Self::with_limit)).
    pub fn limit(&self) -> Option<u32> {
        self.limit
    }

    /// The limit as the scripts take it: `""` for none.
    fn limit_arg(&self) -> String {
        self.limit.map(|l| l.to_string()).unwrap_or_default()
    }

    /// The Redis key of the count.
    pub fn key(&self) -> &str {
        &self.shared.key
    }

    /// Sets the count of free permits to `permits` if no count is set yet (the first instance
    /// to start wins); returns whether it did.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] when the key holds something else than a count, [`Error::Redis`].
    pub async fn try_set_permits(&self, permits: u32) -> Result<bool> {
        Ok(self.shared.change(CountChange::TrySet(permits)).await?.0)
    }

    /// As [`try_set_permits`](Self::try_set_permits), and the count expires `ttl` after it is
    /// set, whatever is taken then (Redisson's `trySetPermits(permits, timeToLive)`): a
    /// semaphore for one job that cleans up after itself. A wait on it once it is gone fails
    /// with [`Error::NotSetUp`] (unless [`with_limit`](Self::with_limit) restores it).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = ferrisson_testkit::RedisServer::spawn();
    /// # let client = ferrisson_core::Client::connect(&server.url()).await?;
    /// use std::time::Duration;
    /// use ferrisson_semaphore::{Semaphore, SyncObject};
    ///
    /// let semaphore = Semaphore::new(&client, "import:2026-12-01")?;
    /// assert!(semaphore.try_set_permits_with_ttl(4, Duration::from_secs(3600)).await?);
    /// assert!(semaphore.remaining_ttl().await?.unwrap() <= Duration::from_secs(3600));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a `ttl` under one millisecond or over
    /// [`MAX_LEASE`](ferrisson_core::duration::MAX_LEASE) (nothing is sent), and as
    /// [`try_set_permits`](Self::try_set_permits).
    pub async fn try_set_permits_with_ttl(&self, permits: u32, ttl: Duration) -> Result<bool> {
        ferrisson_core::duration::validate_lease("a time to live", ttl)?;
        let change = CountChange::TrySetWithTtl(permits, ttl);
        Ok(self.shared.change(change).await?.0)
    }

    /// Sets the count of free permits, whatever it was, and wakes waiters. The plain
    /// semaphore keeps no record of the permits taken (neither does Redisson's `RSemaphore`
    /// layout), so this is the count of *free* permits: permits taken now and released later
    /// come on top of it. The permit-expirable semaphore's
    /// [`set_permits`](https://docs.rs/ferrisson-expirable-semaphore) sets the total instead,
    /// as Redisson's `RPermitExpirableSemaphore.setPermits` does.
    ///
    /// # Errors
    ///
    /// As [`try_set_permits`](Self::try_set_permits).
    pub async fn set_permits(&self, permits: u32) -> Result<()> {
        self.shared
            .change(CountChange::Set(permits))
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
        Ok(self.shared.change(CountChange::Add(delta)).await?.1)
    }

    /// Takes every available permit at once and returns how many (0 when the count is zero,
    /// below zero, or not set; a count below zero stays as it is, where Redisson sets it to 0).
    ///
    /// # Errors
    ///
    /// As [`try_set_permits`](Self::try_set_permits).
    pub async fn drain_permits(&self) -> Result<u64> {
        let call = ScriptCall::new(&DRAIN, &[&self.shared.key]);
        let drained: i64 = self.shared.client.eval_once(&call).await?;
        Ok(u64::try_from(drained).unwrap_or(0))
    }

    /// The permits available now (0 when no count is set; below zero after a negative
    /// [`add_permits`](Self::add_permits)).
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`], [`Error::Redis`], [`Error::Protocol`] when the key holds a string
    /// that is not a count.
    pub async fn available_permits(&self) -> Result<i64> {
        read_permits(&self.shared.client, &self.shared.key).await
    }

    /// Takes one permit, waiting as long as it takes; the [`Permits`] give it back when
    /// dropped (or with [`Permits::release`]; [`Permits::forget`] keeps it taken).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, and nothing leaks: dropped while an acquire call may have run, the permits
    /// it may have taken are given back (once) by a call that follows it on the same
    /// connection; dropped while waiting, the caller's reservation goes at once.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] when the key holds something else than a count,
    /// [`Error::InvalidArgument`] (with [`with_limit`](Self::with_limit)) for more permits than
    /// the limit, [`Error::Unreachable`] when Redis cannot be reached (at the first try, or for
    /// longer than the client's outage limit while waiting), [`Error::Closed`] once the client
    /// is shut down.
    pub async fn acquire(&self) -> Result<Permits> {
        self.acquire_many(1).await
    }

    /// Takes a permit, runs `work`, gives the permit back, and returns the work's output: the
    /// scoped form, for a call to a rate-limited API. The permit goes back when the work ends,
    /// and, if this future is dropped, in the background (as a dropped [`Permits`]).
    ///
    /// ```no_run
    /// # async fn demo(limit: ferrisson_semaphore::Semaphore) -> ferrisson_semaphore::Result<()> {
    /// let status = limit.with(|_| async { /* call the partner API */ 200 }).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// A release that fails after the work ran (Redis unreachable past the retries) is logged
    /// at `warn`, and the work's output is returned: the permit is then lost to the pool, as
    /// a plain semaphore's permit of a crashed holder is.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire) while it waits, then as cancel safe as `work`.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    pub async fn with<F, Fut>(&self, work: F) -> Result<Fut::Output>
    where
        F: FnOnce(Hold) -> Fut,
        Fut: std::future::Future,
    {
        let permit = self.acquire().await?;
        // A plain semaphore's permit has no lease: its hold has no token and is never lost.
        let output = work(Hold::new(None, None)).await;
        if let Err(e) = permit.release().await {
            tracing::warn!(key = %self.shared.key, error = %e, "the work ran, but giving its permit back failed");
        }
        Ok(output)
    }

    /// Takes `n` permits at once, waiting as long as it takes.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// # Errors
    ///
    /// The errors of [`acquire`](Self::acquire). `n = 0` succeeds at once with no permits (as
    /// Redisson's `acquire(0)` and `tokio::sync::Semaphore::acquire_many(0)`).
    pub async fn acquire_many(&self, n: u32) -> Result<Permits> {
        match self.take(n, None).await? {
            Some(permits) => Ok(permits),
            None => Err(Error::Protocol(
                "an unbounded wait for permits ended without them".into(),
            )),
        }
    }

    /// Takes one permit if one is free right now (beyond any reservation of an older waiting
    /// call); `Ok(None)` otherwise. One script call.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    pub async fn try_acquire(&self) -> Result<Option<Permits>> {
        self.try_acquire_many(1).await
    }

    /// Takes `n` permits if that many are free right now; `Ok(None)` otherwise.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// # Errors
    ///
    /// As [`acquire_many`](Self::acquire_many).
    pub async fn try_acquire_many(&self, n: u32) -> Result<Option<Permits>> {
        self.take(n, Some(Duration::ZERO)).await
    }

    /// Takes one permit, waiting up to the options' wait (none given: one try;
    /// `Duration::MAX`: no limit); `Ok(None)` when none came in time.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire), and [`Error::InvalidArgument`] for options with a lease
    /// (this semaphore's permits have none: [`ExpirableSemaphore`] has).
    ///
    /// [`ExpirableSemaphore`]: https://docs.rs/ferrisson-expirable-semaphore
    pub async fn try_acquire_with(&self, options: AcquireOptions) -> Result<Option<Permits>> {
        self.try_acquire_many_with(1, options).await
    }

    /// Takes `n` permits, waiting up to the options' wait (none given: one try); `Ok(None)`
    /// when they did not come in time.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// # Errors
    ///
    /// As [`try_acquire_with`](Self::try_acquire_with).
    pub async fn try_acquire_many_with(
        &self,
        n: u32,
        options: AcquireOptions,
    ) -> Result<Option<Permits>> {
        let wait = wait_without_lease(options, &self.shared.key)?;
        self.take(n, Some(wait.unwrap_or(Duration::ZERO))).await
    }

    /// Gives `n` permits back (permits need not have been taken by this caller, as with
    /// Redisson) and wakes up to `n` waiters.
    ///
    /// # Cancel safety
    ///
    /// Dropping this future does not lose the release: one that may have been sent is sent
    /// again in the background with the same record slot and number (Redis counts it once).
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`], [`Error::Redis`]. `n = 0` succeeds at once and changes nothing.
    pub async fn release(&self, n: u32) -> Result<()> {
        self.release_from(n, None).await
    }

    /// Gives back `n` permits only if the semaphore exists (its count is set), and returns
    /// whether it did (Redisson's `releaseIfExists`): a count that was deleted, or expired
    /// ([`try_set_permits_with_ttl`](Self::try_set_permits_with_ttl)), is not brought back by
    /// a late release. `n = 0` releases nothing and returns `false` at once, as Redisson does.
    ///
    /// # Cancel safety
    ///
    /// As [`release`](Self::release): a call that may have been sent is sent again in the
    /// background with the same record slot and number (Redis counts it once).
    ///
    /// # Errors
    ///
    /// As [`release`](Self::release).
    pub async fn release_if_exists(&self, n: u32) -> Result<bool> {
        if n == 0 {
            return Ok(false);
        }
        Ok(self.release_sent(n, None, true).await?.is_some())
    }

    /// Gives back `n` permits taken in `epoch` (`None`: of unknown origin): permits of an
    /// epoch before the last restore of a lost count change nothing.
    async fn release_from(&self, n: u32, epoch: Option<i64>) -> Result<()> {
        if n == 0 {
            // Zero permits: nothing to give back (Redisson's `release(0)`).
            return Ok(());
        }
        // Straight to this client's waiters first (the engine's local hand-off); what they do
        // not take goes back publicly. A hand-off left unaccepted is made a value and dropped,
        // which releases it.
        let semaphore = self.clone();
        let n = hand_off_permits(
            &self.shared.client,
            &self.shared.channel,
            n,
            epoch,
            move |taken| drop(semaphore.permits_of(taken)),
        );
        if n == 0 {
            return Ok(());
        }
        self.release_sent(n, epoch, false).await.map(drop)
    }

    /// Sends the release of `n` permits ([`release_call`](Self::release_call)) under a new
    /// slot and number of the client's record, and sends it again in the background under the
    /// same when the caller drops the call, or its outcome stays unknown (Redis counts it once).
    async fn release_sent(
        &self,
        n: u32,
        epoch: Option<i64>,
        if_exists: bool,
    ) -> Result<Option<i64>> {
        let client = &self.shared.client;
        // The release's slot in the record stays taken until it is settled, resend included.
        let recorded = Arc::new(self.shared.record.start(client));
        let call = |resend| self.release_call(n, epoch, if_exists, &recorded, resend);
        recorded
            .send_through(client, &call(false), &call(true))
            .await
    }

    /// The release script call (`resend`: the form for every send after the first, which notes
    /// the slot as sent again when it is sent): `None` when `if_exists` and no count is set
    /// (nothing changed), else the count after.
    fn release_call(
        &self,
        n: u32,
        epoch: Option<i64>,
        if_exists: bool,
        recorded: &RecordedCall,
        resend: bool,
    ) -> ScriptCall {
        let shared = &self.shared;
        let client = &shared.client;
        let call = ScriptCall::new(&RELEASE, &[&shared.key])
            .arg(n)
            .arg(client.config().publish_command().as_str())
            .arg(shared.record.client_hex());
        let call = recorded.form_args(call, client, resend, "");
        // The rest only when it differs from the defaults (no limit, epoch "0", not
        // releaseIfExists): each argument costs Redis on every call.
        let epoch = epoch.map(|e| e.to_string()).unwrap_or_default();
        if if_exists {
            call.arg(self.limit_arg()).arg(epoch).arg("1")
        } else if self.limit.is_some() || epoch != "0" {
            call.arg(self.limit_arg()).arg(epoch)
        } else {
            call
        }
    }

    /// Takes `n` permits, trying once (`wait` zero), up to `wait`, or as long as it takes.
    async fn take(&self, n: u32, wait: Option<Duration>) -> Result<Option<Permits>> {
        if let Some(limit) = self.limit
            && n > limit
        {
            return Err(Error::InvalidArgument(format!(
                "{n} permits asked of `{}`, whose limit is {limit}: a wait for them would never end",
                self.shared.key
            )));
        }
        if n == 0 {
            // Zero permits are always there (Redisson's `acquire(0)`, tokio's
            // `acquire_many(0)`): no call, and nothing to give back.
            return Ok(Some(Permits {
                semaphore: self.clone(),
                count: 0,
                held: false,
                ticket: None,
                epoch: None,
            }));
        }
        let ask = PermitAsk {
            names: self.shared.clone(),
            scripts: &SCRIPTS,
            n,
            lease_ms: 0,
            limit: self.limit,
            seed_tag: 0,
        };
        let Some(grant) = take(ask, wait, Some(Need::permits(n))).await? else {
            return Ok(None);
        };
        self.permits_of(grant.accept())
            .map(Some)
            .ok_or_else(|| Error::Protocol("an acquire of permits took something else".into()))
    }
}

impl Permits {
    /// Lets go of the permits without giving them back: they stay taken until someone
    /// [`release`](Semaphore::release)s that many (as `tokio::sync::SemaphorePermit::forget`).
    pub fn forget(mut self) {
        // Not the shutdown's to give back either.
        self.claim();
    }
}

/// One acquire call: its id (the reservation's owner) and its tries.
/// The semaphore's acquire and undo scripts, as the core's permit engine calls them.
/// The semaphore's kind, as the core's permit engine takes it: its scripts and their arguments,
/// and what a try takes (permits of the count). The engine builds each try's calls from this and
/// never calls back into this crate.
static SCRIPTS: PermitScripts = PermitScripts {
    kind: "semaphore",
    acquire: &ACQUIRE,
    acquire_args: &[PermitArg::Count, PermitArg::Client, PermitArg::Record],
    undo: &UNDO_ACQUIRE,
    undo_args: &[PermitArg::Count, PermitArg::Publish, PermitArg::Client],
    made: PermitsMade::Counted,
};

impl Semaphore {
    /// The permits a try took or a local releaser handed over ([`Taken::Permits`]); `None` for
    /// anything else (never delivered: a claim checks what the waiter takes).
    fn permits_of(&self, taken: Taken) -> Option<Permits> {
        match taken {
            Taken::Permits { count, epoch } => Some(Permits::taken(self, count, epoch)),
            Taken::Hold { .. }
            | Taken::Permit { .. }
            | Taken::Seeded { .. }
            | Taken::Holds { .. } => None,
        }
    }
}

/// The semaphore's keys: the count and the waiting reservation **\[ext\]** (an expiry and a
/// delete cover both). A delete sends no message; waiters look again within their recheck and
/// then fail with [`Error::NotSetUp`] (or, [`with_limit`](Semaphore::with_limit), restore the
/// count). The count's epoch is kept: permits taken before the delete give nothing back to a
/// count restored after it.
impl ferrisson_core::__engine::ObjectLayout for Semaphore {
    fn object_keys(&self) -> ferrisson_core::__engine::ObjectKeys<'_> {
        let shared = &self.shared;
        ferrisson_core::__engine::ObjectKeys::new(
            &shared.client,
            ferrisson_core::__engine::KeyShape::Count,
            vec![&shared.key, &shared.intent_key],
        )
    }
}
