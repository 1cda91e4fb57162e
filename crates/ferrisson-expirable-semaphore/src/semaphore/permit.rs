//! A permit: its id, its lease, and how it is released.

use super::*;

/// One permit taken from an [`ExpirableSemaphore`]: its id, its loss signal (dereferences to
/// the [`HoldGuard`] every hold has), and its release, explicit or when dropped (in the
/// background; a process about to end calls [`Client::shutdown`] after dropping it, which
/// waits for that release).
///
/// A permit taken with a fixed lease is extended with [`HoldGuard::extend`] (a new lease from
/// now, on the server and in the guard's loss signal), as a lock's hold is.
#[must_use = "dropping the permit releases it at once (in the background)"]
#[derive(Debug)]
pub struct Permit {
    pub(super) id: String,
    pub(super) guard: HoldGuard,
}

impl Permit {
    /// The permit's id, 32 lowercase hex characters.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Releases the permit, waking a waiter.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] when the permit had been lost before (its lease ran out),
    /// [`Error::NotOwner`] when Redis no longer holds it, [`Error::Redis`].
    pub async fn release(self) -> Result<()> {
        self.guard.unlock().await
    }

    /// Keeps the permit taken without this guard, and returns its id: for code that releases
    /// permits by id ([`ExpirableSemaphore::release`], possibly in another process). The
    /// watchdog stops renewing it, so it returns to the pool when its lease runs out unless
    /// released first.
    pub fn detach(self) -> String {
        self.guard.detach();
        self.id
    }
}

impl std::ops::Deref for Permit {
    type Target = HoldGuard;

    fn deref(&self) -> &HoldGuard {
        &self.guard
    }
}

/// Sets the lease of the permit `id` to `lease` from now if it is taken and unexpired
/// (`expirable_semaphore/renew`; an expired permit is never revived): `Ok(false)` otherwise.
pub(super) async fn renew_one(shared: &Shared, id: &str, lease: Duration) -> Result<bool> {
    let call = ScriptCall::new(&RENEW, &[&shared.timeouts])
        .arg(ferrisson_core::__engine::time::millis(lease))
        .arg(id);
    let reply: Vec<i64> = shared.client.eval(&call).await?;
    Ok(reply.first() == Some(&1))
}

/// How one permit is released: by its id.
pub(super) struct PermitRelease {
    pub(super) shared: Arc<Shared>,
    pub(super) id: String,
}

impl Release for PermitRelease {
    fn key(&self) -> &str {
        &self.shared.key
    }

    fn metric_kind(&self) -> &'static str {
        "expirable_semaphore"
    }

    fn runs_on(&self) -> &Client {
        &self.shared.client
    }

    fn release(
        self: Arc<Self>,
        _owner: Owner,
        end: LeaseEnd,
    ) -> futures::future::BoxFuture<'static, Result<Released>> {
        Box::pin(async move {
            // A lost permit is not held: only a live one can go to a waiter.
            if end.lost.is_none()
                && let Some(released) = self.hand_off().await?
            {
                return Ok(released);
            }
            let count = release_ids(&self.shared, &[self.id.as_str()], ReleaseMode::All).await?;
            Ok(if count < 0 {
                Released::NotOwner
            } else {
                Released::Freed { subscribers: 0 }
            })
        })
    }

    /// The permit's lease set anew, `lease` from now, if it is still taken and unexpired
    /// (`expirable_semaphore/renew`, idempotent: a lost reply is settled by sending it again):
    /// what [`HoldGuard::extend`] does for a [`Permit`] taken with a fixed lease.
    fn extend(
        self: Arc<Self>,
        _owner: Owner,
        lease: Duration,
    ) -> futures::future::BoxFuture<'static, Result<bool>> {
        Box::pin(async move { renew_one(&self.shared, &self.id, lease).await })
    }
}

impl PermitRelease {
    /// Gives this permit to the longest-waiting local call for one permit, if there is one and
    /// the hand-off streak allows (**\[ext\]**): the `hand_off` script swaps this id for a new
    /// one with the waiter's lease, and the waiter gets the new [`Permit`]. `None`: nobody to
    /// hand it to, release it publicly.
    ///
    /// Cancel safe, and so is a failed call: the call is sent again in the background with the
    /// same record slot and number (Redis runs it once), and a permit handed to nobody is released.
    pub(super) async fn hand_off(&self) -> Result<Option<Released>> {
        let shared = &self.shared;
        let client = &shared.client;
        // Only calls for one permit wait with a need, and it names their owner.
        let Some(claim) = client.claim_waiter(&shared.channel, Takes::Permit, MAX_HANDOFF_STREAK)
        else {
            return Ok(None);
        };
        let Some(owner) = claim.need().owner.clone() else {
            return Ok(None);
        };
        let wanted = claim.need().lease;
        let watched = wanted.is_none();
        let lease = wanted.unwrap_or(client.config().lease());
        let successor = format!("{:032x}", shared.fresh_id_seed());
        // A retry needs no latch: the successor's id is new, so finding it taken says the lost
        // call handed the permit over.
        let call = |successor: &str, retry: bool| {
            ScriptCall::new(&HAND_OFF, &[&shared.timeouts])
                .arg(&raw_id(&self.id)[..])
                .arg(&raw_id(successor)[..])
                .arg(ferrisson_core::__engine::time::millis(lease))
                .arg(if retry { "1" } else { "0" })
        };
        let resend = CleanupGuard::new(client, || {
            let shared = shared.clone();
            let call = call(&successor, true);
            let successor = successor.clone();
            async move {
                match shared.client.eval::<i64>(&call).await {
                    // Handed to a waiter that was never told: give the permit back.
                    Ok(1) => {
                        if let Err(e) =
                            release_ids(&shared, &[successor.as_str()], ReleaseMode::All).await
                        {
                            tracing::warn!(key = %shared.key, error = %e, "releasing a permit handed to nobody failed; it expires with its lease");
                        }
                    }
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!(key = %shared.key, error = %e, "resending an abandoned permit hand-off failed; the permit expires with its lease");
                    }
                }
            }
        });
        let sent_at = Instant::now();
        let handed: i64 = client.eval_each(|n| call(&successor, n > 0)).await?;
        resend.disarm();
        if handed != 1 {
            // The permit had expired: nothing to hand over, and nothing to release either.
            return Ok(Some(Released::NotOwner));
        }
        let handle = permit_lease(shared, &successor, lease, watched, sent_at);
        let taken = Taken::Permit {
            id: successor,
            owner,
            lease: handle,
        };
        // A waiter that left meanwhile gets nothing: the permit comes back (or stays in its
        // slot unaccepted), is made a permit and dropped, which releases it.
        let undo_shared = shared.clone();
        let grant = Grant::new(taken, move |taken| {
            if let Taken::Permit { id, owner, lease } = taken {
                drop(permit_of(&undo_shared, id, owner, lease));
            }
        });
        if let Err(unclaimed) = claim.deliver(grant) {
            drop(unclaimed);
        }
        Ok(Some(Released::HandedOff))
    }
}

/// A permit just taken under `id`: registered with the watchdog (renewed when `watched`) and
/// released by id.
pub(super) fn new_permit(
    shared: &Arc<Shared>,
    id: String,
    owner: Owner,
    lease: Duration,
    watched: bool,
    sent_at: Instant,
) -> Permit {
    let handle = permit_lease(shared, &id, lease, watched, sent_at);
    permit_of(shared, id, owner, handle)
}

/// The watchdog's registration of the permit `id`, taken at `sent_at` with `lease` (renewed
/// when `watched`).
fn permit_lease(
    shared: &Shared,
    id: &str,
    lease: Duration,
    watched: bool,
    sent_at: Instant,
) -> LeaseHandle {
    shared.client.hold_lease(LeaseSpec {
        script: &RENEW,
        key: shared.timeouts.clone(),
        owner: id.into(),
        lease,
        renew: watched,
        sent_at,
    })
}

/// The permit `id` of `owner`, registered with the watchdog as `handle`, released by id.
pub(super) fn permit_of(
    shared: &Arc<Shared>,
    id: String,
    owner: Owner,
    handle: LeaseHandle,
) -> Permit {
    let release = Arc::new(PermitRelease {
        shared: shared.clone(),
        id: id.clone(),
    });
    Permit {
        guard: ferrisson_core::__engine::hold_guard(release, owner, handle, None),
        id,
    }
}

/// A permit id as the scripts take it: its 16 raw bytes, the layout's form (ids are 32 hex
/// characters, made here or checked by [`check_id`]; decoding them in Lua cost Redis about
/// 2 µs per id).
pub(super) fn raw_id(id: &str) -> [u8; 16] {
    u128::from_str_radix(id, 16).unwrap_or(0).to_be_bytes()
}

pub(super) fn check_id(id: &str) -> Result<()> {
    if id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "a permit id is 32 hex characters, got `{id}`"
        )))
    }
}

/// Which permits of a list a release gives back.
#[derive(Debug, Clone, Copy)]
pub(super) enum ReleaseMode {
    /// All of them, or none when one is not held: the count after, or `-i` for the first id
    /// (1-based) not held.
    All,
    /// Those held: how many.
    Held,
}

/// Releases permits by id as `mode` says, under one slot and number of the client's record:
/// what the script replied (see [`ReleaseMode`]).
///
/// # Cancel safety
///
/// Dropped, or left with its outcome unknown, the release is sent again in the background
/// under the same slot and number: Redis runs it once.
pub(super) async fn release_ids(shared: &Shared, ids: &[&str], mode: ReleaseMode) -> Result<i64> {
    let client = &shared.client;
    let recorded = Arc::new(shared.record.start(client));
    let call = |resend: bool| {
        let call = ScriptCall::new(&RELEASE, &[&shared.key])
            .arg(client.config().publish_command().as_str())
            .arg(match mode {
                ReleaseMode::All => "all",
                ReleaseMode::Held => "held",
            })
            .arg(shared.record.client_hex());
        let mut call = recorded.form_args(call, client, resend, "");
        for id in ids {
            call = call.arg(&raw_id(id)[..]);
        }
        call
    };
    recorded
        .send_through(client, &call(false), &call(true))
        .await
}
