//! The guard of a held reentrant lock.

use std::sync::Arc;

use ferrisson_core::{Error, Instant, LeaseHandle, LossReason, Owner, Result};

use crate::lock::{LockShared, Released, spawn_cleanup};

/// One hold of a [`ReentrantLock`](crate::ReentrantLock).
///
/// Release it with [`unlock`](Self::unlock) to learn the outcome. Dropping it releases the
/// hold in the background (never blocking); without a Tokio runtime to run that release, the
/// hold ends when its lease runs out, since the watchdog stops renewing it at once.
///
/// While held, watch [`lost`](Self::lost): it resolves if the hold cannot be kept, before the
/// lease can have run out on the server, so the holder can stop before another holder gets in.
#[must_use = "dropping the guard releases the lock at once (in the background)"]
pub struct LockGuard {
    shared: Arc<LockShared>,
    owner: Owner,
    lease: Option<LeaseHandle>,
    token: Option<u64>,
}

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockGuard")
            .field("key", &self.shared.key)
            .field("owner", &self.owner)
            .field("token", &self.token)
            .field("lost", &self.loss_reason())
            .finish()
    }
}

impl LockGuard {
    pub(crate) fn new(
        shared: Arc<LockShared>,
        owner: Owner,
        lease: LeaseHandle,
        token: Option<u64>,
    ) -> Self {
        Self {
            shared,
            owner,
            lease: Some(lease),
            token,
        }
    }

    /// The fencing token of this acquisition (fenced locks only): strictly greater than the
    /// token of every earlier acquisition of the lock, by any owner. Pass it to the protected
    /// resource, which rejects a write whose token is below the highest it has seen.
    pub fn token(&self) -> Option<u64> {
        self.token
    }

    /// The owner the hold is recorded under.
    pub fn owner(&self) -> &Owner {
        &self.owner
    }

    /// The Redis key of the lock.
    pub fn key(&self) -> &str {
        &self.shared.key
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
        match self.loss_reason() {
            Some(reason) => Err(Error::LeaseLost(reason)),
            None => Ok(()),
        }
    }

    /// Resolves when the hold is lost, with the reason; pending while it is held. Use it in a
    /// `tokio::select!` beside the work the lock protects.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = ferrisson_testkit::RedisServer::spawn();
    /// # let client = ferrisson_core::Client::connect(&server.url()).await?;
    /// use std::time::Duration;
    /// use ferrisson_core::LossReason;
    /// use ferrisson_lock::{LockOptions, ReentrantLock};
    ///
    /// let lock = ReentrantLock::new(&client, "short")?;
    /// let guard = lock.lock_with(LockOptions::new().lease(Duration::from_millis(50))).await?;
    /// // A fixed lease simply runs out, and the guard says so.
    /// assert_eq!(guard.lost().await, LossReason::LeaseExpired);
    /// assert!(guard.ensure_held().is_err());
    /// # Ok(()) }
    /// ```
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
    /// sent again in the background with the same request id (Redis counts it once), and one
    /// that was not sent yet is sent then.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] when the hold had been lost before (whatever Redis said then: the
    /// lock was not held continuously), [`Error::NotOwner`] when Redis says this owner holds
    /// nothing, [`Error::Redis`] when Redis could not be reached (the hold then ends with its
    /// lease: the watchdog no longer renews it).
    pub async fn unlock(mut self) -> Result<()> {
        let Some(lease) = self.lease.take() else {
            return Ok(());
        };
        // Leave the watchdog first, so it does not renew a hold being released; only the
        // last local hold of a live lock can go straight to a local waiter.
        let end = lease.end();
        let lost = end.lost;
        let renew_lease = end
            .renewed
            .then(|| self.shared.client.config().lease_duration());
        let handoff = lost.is_none() && end.last_hold;
        // Boxed: the call's state is on the heap only while it runs, so the futures of tasks
        // that will unlock later stay small while they wait.
        let released = Box::pin(self.shared.release(&self.owner, renew_lease, handoff)).await?;
        match (released, lost) {
            (_, Some(reason)) => Err(Error::LeaseLost(reason)),
            (Released::NotOwner, None) => Err(Error::NotOwner(format!(
                "lock `{}` is not held by {}",
                self.shared.key, self.owner
            ))),
            (_, None) => Ok(()),
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        let Some(lease) = self.lease.take() else {
            return;
        };
        let end = lease.end();
        let renew_lease = end
            .renewed
            .then(|| self.shared.client.config().lease_duration());
        let handoff = end.lost.is_none() && end.last_hold;
        let shared = self.shared.clone();
        let owner = self.owner.clone();
        let spawned = spawn_cleanup(async move {
            if let Err(e) = shared.release(&owner, renew_lease, handoff).await {
                tracing::warn!(key = %shared.key, %owner, error = %e, "background unlock failed; the hold ends with its lease");
            }
        });
        if !spawned {
            tracing::warn!(
                key = %self.shared.key,
                owner = %self.owner,
                "lock guard dropped outside a Tokio runtime; the hold ends with its lease"
            );
        }
    }
}
