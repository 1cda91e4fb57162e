//! The guard of a hold, which every lock kind shares (loss signal, fencing token, release on
//! unlock or drop), the seam through which it releases ([`Release`]), and the cleanups that
//! cancelled or unknown calls leave to the background ([`CleanupGuard`]).

use std::sync::Arc;

use futures::future::BoxFuture;

use crate::client::Client;
use crate::client::ClientEngine;
use crate::error::{Error, LossReason, Result};
use crate::holds::{GiveBack, HoldTicket};
use crate::owner::Owner;
use crate::watchdog::{LeaseEnd, LeaseHandle};
use tokio::time::Instant;

/// What a release did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Released {
    /// The owner held nothing.
    NotOwner,
    /// Holds of the owner remain.
    StillHeld,
    /// The lock is free; a waiter was woken. `subscribers`: how many subscriber connections
    /// its release message reached (0: it published nothing, or the count is not known).
    Freed {
        /// Subscriber connections the release message reached.
        subscribers: u64,
    },
    /// The lock went straight to a local waiter.
    HandedOff,
}

/// How a lock kind releases one hold; the guard calls it on unlock and on drop.
pub trait Release: Send + Sync + 'static {
    /// The Redis key of the lock, for messages.
    fn key(&self) -> &str;

    /// The client the hold was taken through (its background releases are its work,
    /// which [`Client::shutdown`] waits for).
    fn runs_on(&self) -> &Client;

    /// The kind's name in metrics labels (`lock`, `fair_lock`, …, `expirable_semaphore`).
    fn metric_kind(&self) -> &'static str {
        "lock"
    }

    /// Releases one hold of `owner`, whose lease has just ended locally as `end` says.
    fn release(
        self: Arc<Self>,
        owner: Owner,
        end: LeaseEnd,
    ) -> BoxFuture<'static, Result<Released>>;

    /// Releases one hold of `owner` as [`release`](Self::release) does, except that when the
    /// lock would become free it goes, in the same step, to a fresh owner of the same client
    /// with `lease` (`None`: kept by the watchdog), whose guard comes back. A kind that cannot
    /// hand off releases, and returns no guard.
    fn release_to_new_owner(
        self: Arc<Self>,
        owner: Owner,
        end: LeaseEnd,
        lease: Option<std::time::Duration>,
    ) -> BoxFuture<'static, Result<(Released, Option<HoldGuard>)>> {
        let _ = lease;
        Box::pin(async move { Ok((self.release(owner, end).await?, None)) })
    }

    /// Sets the lease of `owner`'s hold to `lease` from now, if `owner` still holds it
    /// (`Ok(false)`: it does not). A kind whose holds cannot be extended this way refuses.
    fn extend(
        self: Arc<Self>,
        owner: Owner,
        lease: std::time::Duration,
    ) -> BoxFuture<'static, Result<bool>> {
        let _ = (owner, lease);
        let key = self.key().to_owned();
        Box::pin(async move {
            Err(Error::InvalidArgument(format!(
                "the hold on `{key}` cannot be extended"
            )))
        })
    }
}

/// One hold of a lock: of a [`ReentrantLock`], a fair lock, or either side of a read-write lock.
///
/// Release it with [`unlock`](Self::unlock) to learn the outcome. Dropping it releases the
/// hold in the background (never blocking); without a Tokio runtime to run that release, the
/// hold ends when its lease runs out, since the watchdog stops renewing it at once. A process
/// about to end calls [`Client::shutdown`] after dropping its guards: it waits for those
/// background releases, which a runtime ending with `main` would otherwise cut short.
///
/// While held, watch [`lost`](Self::lost): it resolves if the hold cannot be kept, before the
/// lease can have run out on the server, so the holder can stop before another holder gets in.
///
/// [`ReentrantLock`]: https://docs.rs/ferrisson-lock
#[must_use = "dropping the guard releases the lock at once (in the background)"]
pub struct HoldGuard {
    lock: Arc<dyn Release>,
    owner: Owner,
    lease: Option<LeaseHandle>,
    /// The hold's registration with the client, which a shutdown gives back while the guard
    /// lives.
    ticket: HoldTicket,
    token: Option<u64>,
    /// When the hold was taken, for `ferrisson_hold_seconds` (read only when metrics are on).
    #[cfg(feature = "metrics")]
    taken_at: std::time::Instant,
}

impl std::fmt::Debug for HoldGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HoldGuard")
            .field("key", &self.lock.key())
            .field("owner", &self.owner)
            .field("token", &self.token)
            .field("lost", &self.loss_reason())
            .finish()
    }
}

/// The guard of a hold just taken, released through `lock`: `lease` is its registration with
/// the watchdog (`ClientEngine::hold_lease`). The engine's way for a synchronizer crate to
/// make a guard; users get guards from acquire calls only.
pub fn hold_guard(
    lock: Arc<dyn Release>,
    owner: Owner,
    lease: LeaseHandle,
    token: Option<u64>,
) -> HoldGuard {
    HoldGuard::new(lock, owner, lease, token)
}

/// A lock as a hold's guard releases through it: what makes a guard of a hold a local
/// release handed over ([`Taken::Hold`](crate::grant::Taken::Hold)), on the lock it was taken
/// on ([`adopt`](Self::adopt)).
#[derive(Clone)]
pub struct HoldLock(Arc<dyn Release>);

impl std::fmt::Debug for HoldLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("HoldLock").field(&self.0.key()).finish()
    }
}

impl HoldLock {
    /// The lock `lock` releases through.
    pub(crate) fn new(lock: Arc<dyn Release>) -> Self {
        Self(lock)
    }

    /// The guard of the hold `taken` on this lock; `None` when `taken` is no hold
    /// (dropped: nothing to release).
    pub fn adopt(&self, taken: crate::grant::Taken) -> Option<HoldGuard> {
        match taken {
            crate::grant::Taken::Hold {
                owner,
                lease,
                token,
            } => Some(HoldGuard::new(self.0.clone(), owner, lease, token)),
            _ => None,
        }
    }
}

impl HoldGuard {
    /// The hold as a hand-off carries it: the lock it is on, and the hold itself
    /// ([`Taken::Hold`](crate::grant::Taken::Hold)), still registered with the watchdog,
    /// which [`HoldLock::adopt`] makes a guard of again. `None` when the hold was given back
    /// already (the client shut down).
    pub fn into_handed(mut self) -> Option<(HoldLock, crate::grant::Taken)> {
        let lease = self.take_lease()?.ok()?;
        Some((
            HoldLock(self.lock.clone()),
            crate::grant::Taken::Hold {
                owner: self.owner.clone(),
                lease,
                token: self.token,
            },
        ))
    }

    /// The guard of a hold just taken: `lease` is its registration with the watchdog.
    pub(crate) fn new(
        lock: Arc<dyn Release>,
        owner: Owner,
        lease: LeaseHandle,
        token: Option<u64>,
    ) -> Self {
        let ticket = lock.runs_on().register_hold(Arc::new(GuardGiveBack {
            lock: lock.clone(),
            owner: owner.clone(),
        }));
        Self {
            lock,
            owner,
            lease: Some(lease),
            ticket,
            token,
            #[cfg(feature = "metrics")]
            taken_at: std::time::Instant::now(),
        }
    }

    /// The fencing token of this acquisition (fenced locks and write locks): strictly greater
    /// than the token of every earlier acquisition of the lock, by any owner. Pass it to the
    /// protected resource, which rejects a write whose token is below the highest it has seen.
    pub fn token(&self) -> Option<u64> {
        self.token
    }

    /// The owner the hold is recorded under.
    pub fn owner(&self) -> &Owner {
        &self.owner
    }

    /// What scoped work gets of this hold ([`Hold`](crate::Hold)): its token, its loss check
    /// and its loss signal, borrowing nothing ([`Lock::with`](crate::Lock::with) hands it to
    /// the work).
    pub fn hold(&self) -> crate::Hold {
        let watch = self
            .lease
            .as_ref()
            .map(|lease| Arc::new(lease.watch()) as Arc<dyn crate::scoped::HoldWatch>);
        crate::Hold::new(self.token, watch)
    }

    /// The Redis key of the lock.
    pub fn key(&self) -> &str {
        self.lock.key()
    }

    /// The client the hold was taken through.
    pub fn client(&self) -> &Client {
        self.lock.runs_on()
    }

    /// Why the hold was lost, or `None` while it is held.
    pub fn loss_reason(&self) -> Option<LossReason> {
        self.lease.as_ref().and_then(LeaseHandle::lost_reason)
    }

    /// Whether the hold was lost.
    pub fn is_lost(&self) -> bool {
        self.loss_reason().is_some()
    }

    /// `Ok(())` while the hold is believed held; [`Error::LeaseLost`] once it is lost.
    /// Call it before each step that must run under the lock.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] with the reason.
    pub fn ensure_held(&self) -> Result<()> {
        Error::unless_lost(self.loss_reason())
    }

    /// Resolves when the hold is lost, with the reason; pending while it is held. Use it in a
    /// `tokio::select!` beside the work the lock protects.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only observes.
    pub async fn lost(&self) -> LossReason {
        match &self.lease {
            Some(lease) => lease.lost().await,
            None => std::future::pending().await,
        }
    }

    /// As [`lost`](Self::lost), as a future that borrows nothing: for a task of its own (a
    /// callback on loss). It stays pending after the hold is released.
    pub fn lost_owned(&self) -> impl std::future::Future<Output = LossReason> + Send + 'static {
        let watch = self.lease.as_ref().map(LeaseHandle::lost_owned);
        async move {
            match watch {
                Some(watch) => watch.await,
                None => std::future::pending().await,
            }
        }
    }

    /// Runs `work` only while the hold lasts: its output, or [`Error::LeaseLost`] with the
    /// reason as soon as the hold is lost (then `work` is dropped at its next await point, before
    /// the lease can have run out on the server). The `select!` on [`lost`](Self::lost) that
    /// protected work needs, written once.
    ///
    /// ```
    /// use ferrisson_core::{HoldGuard, Result};
    ///
    /// async fn post_entry(guard: &HoldGuard) -> Result<u64> {
    ///     // Cut off with `Error::LeaseLost` if the lock goes while the write runs.
    ///     guard.while_held(async { /* the protected write */ 42 }).await
    /// }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// As cancel safe as `work`: dropping this future drops `work`; the hold stays.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] when the hold was lost before or while `work` ran.
    pub async fn while_held<F: std::future::Future>(&self, work: F) -> Result<F::Output> {
        self.ensure_held()?;
        until_lost(self.lost(), work).await
    }

    /// Runs `work` while the hold lasts ([`while_held`](Self::while_held): a loss cuts it
    /// off), then unlocks, and returns the work's output: the scoped form of a hold, as
    /// node-redlock's `using` or a Python `with` block. What [`Lock::with`](crate::Lock::with)
    /// does after taking the lock.
    ///
    /// The work ran entirely while held when this returns `Ok`: an unlock that fails after it
    /// (Redis unreachable, the lease lapsing just after the work ended) is logged at `warn`,
    /// and the hold ends with its lease, since nothing the work did is undone by it.
    ///
    /// # Cancel safety
    ///
    /// As cancel safe as `work`: dropping this future drops `work` and the guard, whose hold
    /// is released in the background.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] when the hold was lost before or while `work` ran (the work was
    /// dropped at that point).
    pub async fn run<F: std::future::Future>(self, work: F) -> Result<F::Output> {
        let output = self.while_held(work).await?;
        let key = self.key().to_owned();
        if let Err(e) = self.unlock().await {
            tracing::warn!(key, error = %e, "the work ran while held, but the unlock after it failed: the hold ends with its lease");
        }
        Ok(output)
    }

    /// The earliest moment the lease can end on the server as known now (the watchdog moves it
    /// forward with each renewal); `None` once lost.
    pub fn lease_deadline(&self) -> Option<Instant> {
        self.lease.as_ref().and_then(LeaseHandle::deadline)
    }

    /// Releases this hold (one level of re-entry), waking a waiter when the lock becomes free.
    ///
    /// # Cancel safety
    ///
    /// Dropping this future does not undo the unlock: a release that may have been sent is
    /// sent again in the background with the same record slot and number (Redis counts it once), and one
    /// that was not sent yet is sent then.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] when the hold had been lost before (whatever Redis said then, an
    /// error included: the lock was not held continuously); at once, without waiting for
    /// Redis, when the client already knows it (its fixed lease ran out by the client's clock,
    /// a renewal failed): what may be left of it on the server is released in the background.
    /// [`Error::NotOwner`] when Redis
    /// says this owner holds nothing, [`Error::Unreachable`] when Redis could not be reached
    /// (the hold then ends with its lease: the watchdog no longer renews it).
    pub async fn unlock(self) -> Result<()> {
        self.unlock_reaching().await.map(|_| ())
    }

    /// As [`unlock`](Self::unlock), saying how many subscriber connections the release
    /// message reached (0 when the lock stayed held, went to a local waiter or published
    /// nothing): a RedLock's unlock tells from it whether other processes wait.
    ///
    /// # Cancel safety
    ///
    /// As [`unlock`](Self::unlock).
    ///
    /// # Errors
    ///
    /// As [`unlock`](Self::unlock).
    #[doc(hidden)]
    pub async fn unlock_reaching(mut self) -> Result<u64> {
        let Some(lease) = self.take_lease() else {
            return Ok(0);
        };
        let lease = lease?;
        // Leave the watchdog first, so it does not renew a hold being released.
        let end = lease.end();
        if let Some(reason) = end.lost {
            // Known lost already: the answer does not wait for Redis (which may be down).
            // What may be left of the hold on the server goes in the background, as a
            // dropped guard's does.
            self.release_in_background(end);
            return Err(Error::LeaseLost(reason));
        }
        let released = self.lock.clone().release(self.owner.clone(), end).await;
        let reached = match &released {
            Ok(Released::Freed { subscribers }) => *subscribers,
            _ => 0,
        };
        self.outcome(released, end.lost).map(|()| reached)
    }

    /// The hold ends here (unlocked, dropped or handed on): how long it lasted goes to
    /// `ferrisson_hold_seconds`.
    fn hold_ended(&self) {
        #[cfg(feature = "metrics")]
        {
            let name = self.lock.runs_on().metric_name(self.lock.key());
            crate::metrics::held(
                self.lock.metric_kind(),
                name.as_deref(),
                self.taken_at.elapsed(),
            );
        }
    }

    /// What a release of this guard's hold comes to for the caller: `lost` (the hold had been
    /// lost before) wins over whatever Redis said, an error included.
    fn outcome(&self, released: Result<Released>, lost: Option<LossReason>) -> Result<()> {
        match (released, lost) {
            (Err(e), Some(reason)) => {
                tracing::debug!(key = %self.lock.key(), owner = %self.owner, error = %e, "releasing a hold lost before failed too");
                Err(Error::LeaseLost(reason))
            }
            (_, Some(reason)) => Err(Error::LeaseLost(reason)),
            (Err(e), None) => Err(e),
            (Ok(Released::NotOwner), None) => Err(Error::NotOwner(format!(
                "`{}` is not held by {}",
                self.lock.key(),
                self.owner
            ))),
            (Ok(_), None) => Ok(()),
        }
    }
}

impl HoldGuard {
    /// Sets the remaining lease of this hold, taken with a fixed lease, to `lease` from now
    /// ("extend if mine", as rslock's, redsync's and redis-py's `extend` do): later or
    /// earlier than it was. The loss signal follows the new lease.
    ///
    /// # Cancel safety
    ///
    /// Dropped while in flight, the extension may or may not have reached Redis: the guard
    /// then counts with the shorter of the old lease and the new one, so it never believes it
    /// holds past the server's expiry either way.
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidArgument`] for a lease under 1 ms or over
    ///   [`MAX_LEASE`](crate::duration::MAX_LEASE), for a hold the watchdog keeps (it is
    ///   renewed already), and for a hold of a kind that cannot be extended;
    /// - [`Error::LeaseLost`] when the hold was lost before (the guard's
    ///   [`loss_reason`](Self::loss_reason)) or Redis says this owner no longer holds it (then
    ///   the guard is lost too, [`LossReason::NotHeld`]), or its old lease ran out while the
    ///   call was in flight;
    /// - [`Error::Unreachable`] when Redis could not be reached (the old lease stands).
    pub async fn extend(&self, lease: std::time::Duration) -> Result<()> {
        crate::duration::validate_lease("lease", lease)?;
        let Some(handle) = &self.lease else {
            return Err(Error::LeaseLost(LossReason::NotHeld));
        };
        if let Some(reason) = handle.lost_reason() {
            return Err(Error::LeaseLost(reason));
        }
        if handle.is_renewed() {
            return Err(Error::InvalidArgument(format!(
                "the hold on `{}` is kept by the watchdog: only a fixed lease is extended",
                self.lock.key()
            )));
        }
        let sent_at = Instant::now();
        // Until the outcome is known, the earlier of the two deadlines holds.
        handle.extended(sent_at, lease, true);
        if !self.lock.clone().extend(self.owner.clone(), lease).await? {
            handle.found_lost(LossReason::NotHeld);
            return Err(Error::LeaseLost(LossReason::NotHeld));
        }
        if handle.extended(sent_at, lease, false) {
            return Ok(());
        }
        Err(Error::LeaseLost(
            handle.lost_reason().unwrap_or(LossReason::LeaseExpired),
        ))
    }

    /// Passes the lock on to a fresh owner of the same client in one round trip: the hold is
    /// released and, in the same script call, the lock is taken for the new owner with `lease`
    /// (`None`: kept by the watchdog), fenced anew when the lock is fenced. The new holder's
    /// guard comes back; `None` when nothing was handed on (the kind does not hand off, or
    /// the owner still holds the lock re-entered: then this releases one hold, as
    /// [`unlock`](Self::unlock) does). What waits of their own (a RedLock's waiters of one
    /// process) use to give the lock to the next of them without freeing it in between.
    ///
    /// # Cancel safety
    ///
    /// As [`unlock`](Self::unlock)'s, and a hand-off whose guard was never returned is undone
    /// in the background.
    ///
    /// # Errors
    ///
    /// As [`unlock`](Self::unlock)'s; a lost hold is released, not handed on.
    pub async fn hand_off(
        mut self,
        lease: Option<std::time::Duration>,
    ) -> Result<Option<HoldGuard>> {
        let Some(handle) = self.take_lease() else {
            return Ok(None);
        };
        let end = handle?.end();
        match self
            .lock
            .clone()
            .release_to_new_owner(self.owner.clone(), end, lease)
            .await
        {
            Ok((released, next)) => self.outcome(Ok(released), end.lost).map(|()| next),
            Err(e) => self.outcome(Err(e), end.lost).map(|()| None),
        }
    }

    /// Lets go of the guard without releasing the hold: the watchdog stops renewing it, and
    /// it ends when its lease runs out, or when someone releases it explicitly (a permit by
    /// its id). Nothing is sent to Redis.
    pub fn detach(mut self) {
        // Not the shutdown's to give back either.
        self.ticket.claim();
        if let Some(lease) = self.lease.take() {
            lease.end();
        }
    }
}

impl Drop for HoldGuard {
    fn drop(&mut self) {
        if let Some(Ok(lease)) = self.take_lease() {
            self.release_in_background(lease.end());
        }
    }
}

impl HoldGuard {
    /// The hold's lease, for this guard to release it (unlock, hand-off, drop): `None` when
    /// it was released already; [`Error::LeaseLost`] with [`LossReason::ClientShutDown`] when
    /// the client's shutdown gave it back first (its lease is ended here).
    fn take_lease(&mut self) -> Option<Result<LeaseHandle>> {
        let lease = self.lease.take()?;
        self.hold_ended();
        if self.ticket.claim() {
            Some(Ok(lease))
        } else {
            lease.end();
            Some(Err(Error::LeaseLost(LossReason::ClientShutDown)))
        }
    }

    /// Sends the release of the hold that `end` left in the background (a guard dropped, or
    /// unlocked when already known lost).
    fn release_in_background(&self, end: LeaseEnd) {
        let release = self.lock.clone().release(self.owner.clone(), end);
        let key = self.lock.key().to_owned();
        let owner = self.owner.clone();
        let spawned = spawn_cleanup(self.lock.runs_on(), async move {
            if let Err(e) = release.await {
                tracing::warn!(%key, %owner, error = %e, "background unlock failed; the hold ends with its lease");
            }
        });
        if !spawned {
            tracing::warn!(
                key = %self.lock.key(),
                owner = %self.owner,
                "lock guard dropped outside a Tokio runtime; the hold ends with its lease"
            );
        }
    }
}

/// How a shutdown gives back a hold whose guard is still alive: released as lost (no
/// hand-off to a local waiter, which the shutdown ends too).
struct GuardGiveBack {
    lock: Arc<dyn Release>,
    owner: Owner,
}

impl GiveBack for GuardGiveBack {
    fn what(&self) -> String {
        format!(
            "{} `{}` of {}",
            self.lock.metric_kind().replace('_', " "),
            self.lock.key(),
            self.owner
        )
    }

    fn give_back(self: Arc<Self>) -> BoxFuture<'static, Result<bool>> {
        Box::pin(async move {
            let end = LeaseEnd {
                lost: Some(LossReason::ClientShutDown),
                last_hold: true,
                renewed: false,
            };
            let released = self.lock.clone().release(self.owner.clone(), end).await?;
            Ok(released != Released::NotOwner)
        })
    }

    fn held(&self) -> Option<crate::holds::Held> {
        let kind = self.lock.metric_kind();
        // An expirable semaphore's permit counts as a permit, not as its owner's hold.
        let permit = kind.ends_with("semaphore");
        Some(crate::holds::Held {
            kind,
            key: self.lock.key().to_owned(),
            owner: (!permit).then(|| self.owner.as_str().to_owned()),
            permits: u64::from(permit),
        })
    }
}

/// Runs a cleanup of `client`'s in the background from a `Drop`, on the current Tokio
/// runtime, as work [`Client::shutdown`] waits for; returns false (nothing runs) outside a
/// runtime: the hold then ends with its lease.
pub fn spawn_cleanup(
    client: &Client,
    cleanup: impl std::future::Future<Output = ()> + Send + 'static,
) -> bool {
    client.spawn_cleanup(cleanup)
}

/// A cleanup that runs in the background (see [`spawn_cleanup`]) if the guard is dropped
/// armed: what a cancelled call must undo (a hold an abandoned acquire may have taken, a queue
/// place, a release to send again). [`disarm`](Self::disarm) once the call has completed.
pub struct CleanupGuard<'c, F, Fut>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    client: &'c Client,
    cleanup: Option<F>,
}

impl<'c, F, Fut> CleanupGuard<'c, F, Fut>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    /// Armed with `cleanup` of `client`'s, which builds the future to run.
    pub fn new(client: &'c Client, cleanup: F) -> Self {
        Self {
            client,
            cleanup: Some(cleanup),
        }
    }

    /// The call completed: nothing to clean up.
    pub fn disarm(mut self) {
        self.cleanup = None;
    }

    /// Runs the cleanup now and waits for it (a caller still present that must undo what it
    /// did before it returns). If this future is dropped, the cleanup is not run again.
    pub async fn run(mut self) {
        if let Some(cleanup) = self.cleanup.take() {
            cleanup().await;
        }
    }

    /// The call whose result is `result` has ended: disarmed when its outcome is known (a
    /// reply arrived, or Redis refused the call), left to run the cleanup now when it is not
    /// (a connection error after the call may have run, past [`Client::settle`]'s window):
    /// an unknown outcome is undone, never taken for a failure that changed nothing.
    ///
    /// [`Client::settle`]: crate::client::ClientEngine::settle
    pub fn settle<T>(self, result: &Result<T>) {
        match result {
            Err(e) if e.is_connection_error() => {
                tracing::debug!(error = %e, "the call's outcome is unknown: undoing what it may have done");
                drop(self);
            }
            _ => self.disarm(),
        }
    }
}

impl<F, Fut> Drop for CleanupGuard<'_, F, Fut>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    fn drop(&mut self) {
        if let Some(cleanup) = self.cleanup.take()
            && !spawn_cleanup(self.client, cleanup())
        {
            tracing::warn!(
                "a cancelled call could not clean up outside a Tokio runtime; what it held ends with its lease"
            );
        }
    }
}

/// Runs `work` until `lost` resolves: its output, or [`Error::LeaseLost`] with the loss's
/// reason (then `work` is dropped at its next await point). What every guard's `while_held`
/// runs once it has checked that it holds.
///
/// # Errors
///
/// [`Error::LeaseLost`] when `lost` resolves first.
pub async fn until_lost<F: std::future::Future>(
    lost: impl std::future::Future<Output = LossReason>,
    work: F,
) -> Result<F::Output> {
    tokio::select! {
        biased;
        reason = lost => Err(Error::LeaseLost(reason)),
        output = work => Ok(output),
    }
}
