//! Both semaphores, blocking, and their permits.

use super::*;

/// A semaphore, blocking ([`Semaphore`](crate::Semaphore)).
#[cfg(feature = "semaphore")]
#[derive(Debug, Clone)]
pub struct Semaphore {
    pub(super) client: Client,
    pub(super) inner: crate::Semaphore,
}

#[cfg(feature = "semaphore")]
impl Semaphore {
    /// Sets the permits unless they are set; `true` when it set them.
    ///
    /// # Errors
    ///
    /// As [`Semaphore::try_set_permits`](crate::Semaphore::try_set_permits).
    pub fn try_set_permits(&self, permits: u32) -> Result<bool> {
        self.client.run(self.inner.try_set_permits(permits))
    }

    /// The permits free now.
    ///
    /// # Errors
    ///
    /// [`Error::Redis`].
    pub fn available_permits(&self) -> Result<i64> {
        self.client.run(self.inner.available_permits())
    }

    /// Takes a permit, waiting as long as it takes.
    ///
    /// # Errors
    ///
    /// As [`Semaphore::acquire`](crate::Semaphore::acquire).
    pub fn acquire(&self) -> Result<Permits> {
        self.acquire_many(1)
    }

    /// Takes a permit if one is free now; `None` otherwise.
    ///
    /// # Errors
    ///
    /// As [`Semaphore::try_acquire`](crate::Semaphore::try_acquire).
    pub fn try_acquire(&self) -> Result<Option<Permits>> {
        self.try_acquire_many_with(1, AcquireOptions::new())
    }

    /// Takes `n` permits, waiting as long as it takes.
    ///
    /// # Errors
    ///
    /// As [`Semaphore::acquire_many`](crate::Semaphore::acquire_many).
    pub fn acquire_many(&self, n: u32) -> Result<Permits> {
        let permits = self.client.run(self.inner.acquire_many(n))?;
        Ok(Permits {
            client: self.client.clone(),
            inner: Some(permits),
        })
    }

    /// Gives `n` permits back that no [`Permits`] guard holds (Redisson's `release(n)`).
    ///
    /// # Errors
    ///
    /// As [`Semaphore::release`](crate::Semaphore::release).
    pub fn release(&self, n: u32) -> Result<()> {
        self.client.run(self.inner.release(n))
    }

    /// Takes `n` permits within the options' wait (none given: one try): `None` when it
    /// passed.
    ///
    /// # Errors
    ///
    /// As [`Semaphore::try_acquire_many_with`](crate::Semaphore::try_acquire_many_with).
    pub fn try_acquire_many_with(
        &self,
        n: u32,
        options: crate::AcquireOptions,
    ) -> Result<Option<Permits>> {
        let permits = self
            .client
            .run(self.inner.try_acquire_many_with(n, options))?;
        Ok(permits.map(|p| Permits {
            client: self.client.clone(),
            inner: Some(p),
        }))
    }
}

/// Permits of a [`Semaphore`], given back when dropped (in the background) or by
/// [`release`](Self::release). The client's last handle, dropped, waits for such background
/// releases ([`Client::shutdown`](Client::shutdown)).
#[cfg(feature = "semaphore")]
#[must_use = "dropping the permits gives them back at once (in the background)"]
#[derive(Debug)]
pub struct Permits {
    pub(super) client: Client,
    pub(super) inner: Option<crate::Permits>,
}

#[cfg(feature = "semaphore")]
impl Permits {
    /// Gives the permits back.
    ///
    /// # Errors
    ///
    /// As [`Permits::release`](crate::Permits::release).
    pub fn release(mut self) -> Result<()> {
        self.client
            .finish(self.inner.take(), crate::Permits::release)
    }
}

#[cfg(feature = "semaphore")]
impl Drop for Permits {
    fn drop(&mut self) {
        self.client.drop_inside(self.inner.take());
    }
}

/// A permit-expirable semaphore, blocking ([`ExpirableSemaphore`](crate::ExpirableSemaphore)).
/// Its permits are [`LockGuard`]s: the loss signal and release on drop come with them.
#[cfg(feature = "expirable-semaphore")]
#[derive(Debug, Clone)]
pub struct ExpirableSemaphore {
    pub(super) client: Client,
    pub(super) inner: crate::ExpirableSemaphore,
}

#[cfg(feature = "expirable-semaphore")]
impl ExpirableSemaphore {
    /// Sets the permits unless they are set; `true` when it set them.
    ///
    /// # Errors
    ///
    /// As [`ExpirableSemaphore::try_set_permits`](crate::ExpirableSemaphore::try_set_permits).
    pub fn try_set_permits(&self, permits: u32) -> Result<bool> {
        self.client.run(self.inner.try_set_permits(permits))
    }

    /// The permits free now.
    ///
    /// # Errors
    ///
    /// [`Error::Redis`].
    pub fn available_permits(&self) -> Result<i64> {
        self.client.run(self.inner.available_permits())
    }

    /// Takes a permit, waiting as long as it takes, kept by the watchdog; its id is
    /// [`LockGuard::as_async`]'s owner.
    ///
    /// # Errors
    ///
    /// As [`ExpirableSemaphore::acquire`](crate::ExpirableSemaphore::acquire).
    pub fn acquire(&self) -> Result<ExpirablePermit> {
        self.acquire_with(crate::AcquireOptions::new())
    }

    /// Takes a permit as the options say: a fixed lease (none: kept by the watchdog) and a
    /// wait limit (none: as long as it takes).
    ///
    /// # Errors
    ///
    /// As [`ExpirableSemaphore::acquire_with`](crate::ExpirableSemaphore::acquire_with).
    pub fn acquire_with(&self, options: crate::AcquireOptions) -> Result<ExpirablePermit> {
        let permit = self.client.run(self.inner.acquire_with(options))?;
        Ok(self.permit(permit))
    }

    /// Takes a permit if one is free now, kept by the watchdog; `None` otherwise.
    ///
    /// # Errors
    ///
    /// As [`ExpirableSemaphore::try_acquire`](crate::ExpirableSemaphore::try_acquire).
    pub fn try_acquire(&self) -> Result<Option<ExpirablePermit>> {
        let permit = self.client.run(self.inner.try_acquire())?;
        Ok(permit.map(|p| self.permit(p)))
    }

    fn permit(&self, permit: crate::Permit) -> ExpirablePermit {
        ExpirablePermit {
            client: self.client.clone(),
            inner: Some(permit),
            watchers: Watchers::default(),
        }
    }
}

/// A permit of an [`ExpirableSemaphore`], given back when dropped (in the background) or by
/// [`release`](Self::release); it carries the loss signal of its lease. The client's last
/// handle, dropped, waits for such background releases ([`Client::shutdown`](Client::shutdown)).
#[cfg(feature = "expirable-semaphore")]
#[must_use = "dropping the permit gives it back at once (in the background)"]
#[derive(Debug)]
pub struct ExpirablePermit {
    pub(super) client: Client,
    pub(super) inner: Option<crate::Permit>,
    /// The tasks of the [`on_lost`](Self::on_lost) callbacks, stopped with the permit.
    pub(super) watchers: Watchers,
}

#[cfg(feature = "expirable-semaphore")]
impl ExpirablePermit {
    /// The permit's id.
    pub fn id(&self) -> &str {
        self.inner.as_ref().map_or("", |p| p.id())
    }

    /// `Ok(())` while the permit is held; [`Error::LeaseLost`] once it is lost.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] with the reason.
    pub fn ensure_held(&self) -> Result<()> {
        self.inner.as_ref().map_or(Ok(()), |p| p.ensure_held())
    }

    /// Why the permit was lost, or `None` while it is held.
    pub fn loss_reason(&self) -> Option<LossReason> {
        self.inner.as_ref().and_then(|p| p.loss_reason())
    }

    /// Whether the permit was lost.
    pub fn is_lost(&self) -> bool {
        self.inner.as_ref().is_some_and(|p| p.is_lost())
    }

    /// Calls `callback` (on the client's runtime thread) if the permit is lost while it is
    /// held, as soon as the watchdog knows, as [`LockGuard::on_lost`] does.
    pub fn on_lost(&self, callback: impl FnOnce(LossReason) + Send + 'static) {
        if let Some(permit) = &self.inner {
            self.watchers
                .watch(&self.client, permit.lost_owned(), callback);
        }
    }

    /// Sets the remaining fixed lease to `lease` from now, if the permit is still taken
    /// ([`HoldGuard::extend`]).
    ///
    /// # Errors
    ///
    /// As [`HoldGuard::extend`].
    pub fn extend(&self, lease: Duration) -> Result<()> {
        match &self.inner {
            Some(permit) => self.client.run(permit.extend(lease)),
            None => Err(Error::LeaseLost(LossReason::NotHeld)),
        }
    }

    /// Gives the permit back.
    ///
    /// # Errors
    ///
    /// As [`Permit::release`](crate::Permit::release).
    pub fn release(mut self) -> Result<()> {
        self.watchers.stop();
        self.client
            .finish(self.inner.take(), crate::Permit::release)
    }
}

#[cfg(feature = "expirable-semaphore")]
impl Drop for ExpirablePermit {
    fn drop(&mut self) {
        self.watchers.stop();
        self.client.drop_inside(self.inner.take());
    }
}

blocking_calls!("semaphore", Semaphore, "Semaphore" => {
    /// Sets the permits, whatever they were.
    fn set_permits(permits: u32) -> ();
    /// Sets the permits unless they are set, the key expiring in `ttl`; `true` when it set them.
    fn try_set_permits_with_ttl(permits: u32, ttl: Duration) -> bool;
    /// Adds `delta` permits (negative: takes them away); the count after.
    fn add_permits(delta: i64) -> i64;
    /// Takes every free permit at once; how many.
    fn drain_permits() -> u64;
    /// Gives `n` permits back only if the semaphore exists; `true` when it did.
    fn release_if_exists(n: u32) -> bool;
});

#[cfg(feature = "semaphore")]
impl Semaphore {
    /// Takes `n` permits if they are free now; `None` otherwise.
    ///
    /// # Errors
    ///
    /// As [`Semaphore::try_acquire_many`](crate::Semaphore::try_acquire_many).
    pub fn try_acquire_many(&self, n: u32) -> Result<Option<Permits>> {
        self.try_acquire_many_with(n, AcquireOptions::new())
    }

    /// Takes a permit within the options' wait (none given: one try); `None` when it passed.
    ///
    /// # Errors
    ///
    /// As [`Semaphore::try_acquire_with`](crate::Semaphore::try_acquire_with).
    pub fn try_acquire_with(&self, options: AcquireOptions) -> Result<Option<Permits>> {
        self.try_acquire_many_with(1, options)
    }

    /// Takes a permit, runs `work` on it and gives it back, as the async
    /// [`with`](crate::Semaphore::with) does: `work`'s output (a failed release after it is
    /// logged). The work gets the permit, as every blocking `with` gets what it runs under.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    pub fn with<T>(&self, work: impl FnOnce(&Permits) -> T) -> Result<T> {
        run_held(self.acquire()?, work, || self.inner.key().to_owned())
    }
}

#[cfg(feature = "semaphore")]
impl Permits {
    /// How many permits these are.
    pub fn count(&self) -> u32 {
        self.inner.as_ref().map_or(0, crate::Permits::count)
    }

    /// Lets go of the permits without giving them back: they stay taken until someone
    /// [`release`](Semaphore::release)s that many.
    pub fn forget(mut self) {
        if let Some(permits) = self.inner.take() {
            permits.forget();
        }
    }
}

blocking_calls!("expirable-semaphore", ExpirableSemaphore, "ExpirableSemaphore" => {
    /// Sets the permits, whatever they were.
    fn set_permits(permits: u32) -> ();
    /// Adds `delta` permits (negative: takes them away); the count after.
    fn add_permits(delta: i64) -> i64;
    /// The permits taken now.
    fn acquired_permits() -> i64;
    /// The permits there are, free and taken.
    fn total_permits() -> i64;
    /// The lease left of the permit `id`; `None` when it is not taken.
    fn remaining_lease(id: &str) -> Option<Duration>;
    /// Sets the lease of the permit `id` to `lease` from now; `false` when it is not taken.
    fn update_lease(id: &str, lease: Duration) -> bool;
    /// Gives the permit `id` back (a permit taken elsewhere, known by its id).
    fn release(id: &str) -> ();
    /// Gives the permit `id` back; `false` when it was not taken.
    fn try_release(id: &str) -> bool;
    /// Gives back those of the permits `ids` that are held (the others are skipped); how many
    /// it released.
    fn try_release_many(ids: &[&str]) -> usize;
    /// Gives every permit of `ids` back, or none.
    fn release_all(ids: &[&str]) -> ();
});

#[cfg(feature = "expirable-semaphore")]
impl ExpirableSemaphore {
    fn permits(&self, permits: Vec<crate::Permit>) -> Vec<ExpirablePermit> {
        permits.into_iter().map(|p| self.permit(p)).collect()
    }

    /// Takes `n` permits, waiting as long as it takes, kept by the watchdog.
    ///
    /// # Errors
    ///
    /// As [`ExpirableSemaphore::acquire_many`](crate::ExpirableSemaphore::acquire_many).
    pub fn acquire_many(&self, n: u32) -> Result<Vec<ExpirablePermit>> {
        self.acquire_many_with(n, AcquireOptions::new())
    }

    /// Takes `n` permits as the options say (a fixed lease, a wait limit).
    ///
    /// # Errors
    ///
    /// As [`ExpirableSemaphore::acquire_many_with`](crate::ExpirableSemaphore::acquire_many_with).
    pub fn acquire_many_with(
        &self,
        n: u32,
        options: AcquireOptions,
    ) -> Result<Vec<ExpirablePermit>> {
        let permits = self.client.run(self.inner.acquire_many_with(n, options))?;
        Ok(self.permits(permits))
    }

    /// Takes `n` permits if they are free now; `None` otherwise.
    ///
    /// # Errors
    ///
    /// As [`ExpirableSemaphore::try_acquire_many`](crate::ExpirableSemaphore::try_acquire_many).
    pub fn try_acquire_many(&self, n: u32) -> Result<Option<Vec<ExpirablePermit>>> {
        self.try_acquire_many_with(n, AcquireOptions::new())
    }

    /// Takes a permit within the options' wait (none given: one try); `None` when it passed.
    ///
    /// # Errors
    ///
    /// As [`ExpirableSemaphore::try_acquire_with`](crate::ExpirableSemaphore::try_acquire_with).
    pub fn try_acquire_with(&self, options: AcquireOptions) -> Result<Option<ExpirablePermit>> {
        let permit = self.client.run(self.inner.try_acquire_with(options))?;
        Ok(permit.map(|p| self.permit(p)))
    }

    /// Takes `n` permits within the options' wait (none given: one try); `None` when it
    /// passed.
    ///
    /// # Errors
    ///
    /// As [`ExpirableSemaphore::try_acquire_many_with`](crate::ExpirableSemaphore::try_acquire_many_with).
    pub fn try_acquire_many_with(
        &self,
        n: u32,
        options: AcquireOptions,
    ) -> Result<Option<Vec<ExpirablePermit>>> {
        let permits = self
            .client
            .run(self.inner.try_acquire_many_with(n, options))?;
        Ok(permits.map(|p| self.permits(p)))
    }

    /// Takes a permit, runs `work` and gives the permit back, as the async
    /// [`with`](crate::ExpirableSemaphore::with) does: `work`'s output, or
    /// [`Error::LeaseLost`] when the permit was lost while it ran (a blocking closure cannot
    /// be cut off: check [`ExpirablePermit::ensure_held`] between its steps).
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire), and [`Error::LeaseLost`].
    pub fn with<T>(&self, work: impl FnOnce(&ExpirablePermit) -> T) -> Result<T> {
        run_held(self.acquire()?, work, || self.inner.key().to_owned())
    }
}

#[cfg(feature = "expirable-semaphore")]
impl ExpirablePermit {
    /// Keeps the permit taken without this handle, and returns its id, to release it by
    /// ([`ExpirableSemaphore::release`]). The watchdog stops renewing it: it returns to the
    /// pool when its lease runs out unless released first.
    pub fn detach(mut self) -> String {
        self.watchers.stop();
        self.inner
            .take()
            .map(crate::Permit::detach)
            .unwrap_or_default()
    }
}

#[cfg(feature = "semaphore")]
impl Semaphore {
    /// This semaphore with a limit: the first acquisition sets the count to `limit` if no
    /// count is set ([`Semaphore::with_limit`](crate::Semaphore::with_limit)).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a limit of 0.
    pub fn with_limit(&self, limit: u32) -> Result<Self> {
        Ok(Self {
            client: self.client.clone(),
            inner: self.inner.with_limit(limit)?,
        })
    }
}

#[cfg(feature = "expirable-semaphore")]
impl ExpirableSemaphore {
    /// This semaphore with a limit: the first acquisition sets the permits to `limit` if
    /// none are set
    /// ([`ExpirableSemaphore::with_limit`](crate::ExpirableSemaphore::with_limit)).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a limit of 0.
    pub fn with_limit(&self, limit: u32) -> Result<Self> {
        Ok(Self {
            client: self.client.clone(),
            inner: self.inner.with_limit(limit)?,
        })
    }
}
