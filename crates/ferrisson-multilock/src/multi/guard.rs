//! The group's guard, and how its holds end.

use super::*;

/// Holds of several locks as one: a [`MultiLock`]'s (all of them) or a [`RedLock`]'s (a
/// quorum). Dropping it releases every hold, in the background: a process about to end calls
/// [`Client::shutdown`] on each client after dropping it, which waits for those releases.
#[derive(Debug)]
pub struct MultiGuard {
    pub(super) guards: Vec<HoldGuard>,
    /// How many holds must stay for the guard to be held.
    pub(super) quorum: usize,
    /// Until when a RedLock with a fixed lease is valid; shared with the loss futures, which
    /// follow an [`extend`](MultiGuard::extend).
    pub(super) valid_until: Validity,
    /// A RedLock's gate, whose waiting acquisitions the unlock hands the lock to.
    pub(super) gate: Option<Arc<Gate>>,
}

/// Why a group of holds is lost: its validity (`valid_until`) over, or fewer than `quorum` of
/// its holds left (`reasons`: each hold's loss, the reason of the first lost); `None` while
/// held.
fn group_loss(
    valid_until: Option<Instant>,
    reasons: &[Option<LossReason>],
    quorum: usize,
) -> Option<LossReason> {
    if valid_until.is_some_and(|v| v <= Instant::now()) {
        return Some(LossReason::LeaseExpired);
    }
    let lost = reasons.iter().filter(|r| r.is_some()).count();
    if reasons.len() - lost < quorum {
        return reasons.iter().find_map(|r| *r);
    }
    None
}

/// Resolves when a group of holds is lost: at `expiry`, or once more than `spare` of `losses`
/// (the holds' loss futures) resolved, with the reason of the last of them.
fn group_lost<L>(
    spare: usize,
    losses: FuturesUnordered<L>,
    expiry: impl std::future::Future<Output = LossReason> + Send + 'static,
) -> impl std::future::Future<Output = LossReason> + Send + 'static
where
    L: std::future::Future<Output = LossReason> + Send + 'static,
{
    let mut losses = losses;
    async move {
        tokio::pin!(expiry);
        let mut lost = 0;
        loop {
            tokio::select! {
                reason = &mut expiry => return reason,
                next = losses.next() => match next {
                    Some(reason) => {
                        lost += 1;
                        if lost > spare {
                            return reason;
                        }
                    }
                    None => return std::future::pending().await,
                },
            }
        }
    }
}

/// A group's loss for scoped work's [`Hold`] ([`MultiGuard::hold`]).
struct MultiWatch {
    holds: Vec<Hold>,
    quorum: usize,
    validity: ValidityWatch,
}

impl HoldWatch for MultiWatch {
    fn loss_reason(&self) -> Option<LossReason> {
        let reasons: Vec<_> = self.holds.iter().map(Hold::loss_reason).collect();
        group_loss(self.validity.get(), &reasons, self.quorum)
    }

    fn lost(&self) -> BoxFuture<'static, LossReason> {
        let spare = self.holds.len().saturating_sub(self.quorum);
        let losses = self.holds.iter().map(|h| Box::pin(h.lost())).collect();
        Box::pin(group_lost(spare, losses, self.validity.expired()))
    }
}

impl MultiGuard {
    /// The holds, in the order of the locks that granted them.
    pub fn holds(&self) -> &[HoldGuard] {
        &self.guards
    }

    /// The largest fencing token among the holds (`None` when no lock is fenced).
    pub fn token(&self) -> Option<u64> {
        self.guards.iter().filter_map(HoldGuard::token).max()
    }

    /// Until when a RedLock taken with a fixed lease is valid (the lease less the time spent
    /// acquiring and the drift allowance); `None` otherwise.
    pub fn valid_until(&self) -> Option<Instant> {
        self.valid_until.get()
    }

    /// Why the guard is lost (a MultiLock: any hold lost; a RedLock: fewer than a quorum
    /// held, or its validity over), or `None` while it is held.
    pub fn loss_reason(&self) -> Option<LossReason> {
        let reasons: Vec<_> = self.guards.iter().map(HoldGuard::loss_reason).collect();
        group_loss(self.valid_until.get(), &reasons, self.quorum)
    }

    /// What scoped work gets of the group's hold ([`Hold`]): the largest token among the
    /// holds, and the group's loss (as [`loss_reason`](Self::loss_reason) and
    /// [`lost`](Self::lost) tell it), borrowing nothing.
    pub fn hold(&self) -> Hold {
        let watch = MultiWatch {
            holds: self.guards.iter().map(HoldGuard::hold).collect(),
            quorum: self.quorum,
            validity: self.valid_until.watch(),
        };
        Hold::new(self.token(), Some(Arc::new(watch)))
    }

    /// `Ok(())` while held; [`Error::LeaseLost`] once lost.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] with the reason.
    pub fn ensure_held(&self) -> Result<()> {
        Error::unless_lost(self.loss_reason())
    }

    /// Resolves when the guard is lost, with the reason of the loss that made it so.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only observes.
    pub async fn lost(&self) -> LossReason {
        self.lost_owned().await
    }

    /// As [`lost`](Self::lost), as a future that borrows nothing: for a task of its own (a
    /// callback on loss). It knows nothing of a release: a lease's validity end
    /// ([`valid_until`](Self::valid_until)) resolves it even after one, so stop the task that
    /// runs it when the guard is released.
    pub fn lost_owned(&self) -> impl std::future::Future<Output = LossReason> + Send + 'static {
        let spare = self.guards.len().saturating_sub(self.quorum);
        let losses = self.guards.iter().map(HoldGuard::lost_owned).collect();
        group_lost(spare, losses, self.valid_until.expired())
    }

    /// Runs `work` only while the guard holds, as [`HoldGuard::while_held`] does for one hold:
    /// its output, or [`Error::LeaseLost`] as soon as the guard is lost (then `work` is dropped
    /// at its next await point).
    ///
    /// # Cancel safety
    ///
    /// As cancel safe as `work`: it only observes the guard.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] when the guard was lost before or while `work` ran.
    pub async fn while_held<F: std::future::Future>(&self, work: F) -> Result<F::Output> {
        self.ensure_held()?;
        ferrisson_core::__engine::until_lost(self.lost(), work).await
    }

    /// Runs `work` while the guard holds ([`while_held`](Self::while_held)), then unlocks,
    /// and returns the work's output, as [`HoldGuard::run`] does for one hold: an unlock that
    /// fails after the work is logged, and the holds end with their lease.
    ///
    /// # Cancel safety
    ///
    /// As cancel safe as `work`: dropping this future drops `work` and the guard, whose holds
    /// are released in the background.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] when the guard was lost before or while `work` ran (its holds are
    /// then released in the background).
    pub async fn run<F: std::future::Future>(self, work: F) -> Result<F::Output> {
        let output = self.while_held(work).await?;
        if let Err(e) = self.unlock().await {
            tracing::warn!(error = %e, "the work ran while held, but the unlock after it failed: the holds end with their lease");
        }
        Ok(output)
    }

    /// Sets the remaining lease of every hold, taken with a fixed lease, to `lease` from now,
    /// as [`HoldGuard::extend`] does for one (redsync's and node-redlock's `extend`). It
    /// succeeds when a quorum (a MultiLock: every lock) extended; a RedLock's
    /// [`valid_until`](Self::valid_until) then moves to `lease` from the call, less the drift
    /// allowance, and the loss signal follows it.
    ///
    /// # Cancel safety
    ///
    /// Dropped while in flight, each extension may or may not have reached its instance:
    /// each hold then counts with the shorter of its old lease and the new one, and the
    /// validity is unchanged.
    ///
    /// # Errors
    ///
    /// - [`Error::LeaseLost`] when the guard was lost before, or is lost after the holds that
    ///   could not be extended;
    /// - [`Error::InvalidArgument`] for a lease under 1 ms or over the maximum, and for holds
    ///   the watchdogs keep (they are renewed already);
    /// - [`Error::Unfinished`] when fewer than a quorum extended while the guard still holds
    ///   (instances unreachable): the old validity stands.
    pub async fn extend(&self, lease: Duration) -> Result<()> {
        if let Some(reason) = self.loss_reason() {
            return Err(Error::LeaseLost(reason));
        }
        let started = Instant::now();
        let outcomes = futures::future::join_all(self.guards.iter().map(|g| g.extend(lease))).await;
        let count = outcomes.len();
        let mut extended = 0;
        let mut failures = Vec::new();
        let mut refused = None;
        for (i, outcome) in outcomes.into_iter().enumerate() {
            match outcome {
                Ok(()) => extended += 1,
                Err(Error::InvalidArgument(why)) => refused = Some(why),
                Err(e) => failures.push(format!("instance {i}: {e}")),
            }
        }
        if extended >= self.quorum {
            if self.valid_until.get().is_some() {
                self.valid_until.set(ferrisson_core::__engine::time::later(
                    started,
                    lease.saturating_sub(drift(lease)),
                ));
            }
            if !failures.is_empty() {
                tracing::info!(extended, quorum = self.quorum, failures = %failures.join("; "), "extended with a quorum");
            }
            return Ok(());
        }
        if let Some(why) = refused {
            return Err(Error::InvalidArgument(why));
        }
        if let Some(reason) = self.loss_reason() {
            return Err(Error::LeaseLost(reason));
        }
        Err(Error::Unfinished(format!(
            "extended on {extended} of {count} instances, fewer than the {} needed ({}); the old validity stands",
            self.quorum,
            failures.join("; ")
        )))
    }

    /// Releases every hold, all at once.
    ///
    /// A RedLock's unlock hands the lock straight to the oldest acquisition of this process
    /// waiting for the same RedLock, when there is one (at most 8 in a row, then the lock is
    /// freed for everyone): each instance's hold goes to the waiter in the release's own
    /// script call, so that the lock passes on in one round trip instead of a release, its
    /// message and a new round. The waiter gets it when a quorum of instances passed it on;
    /// otherwise what passed is released and the waiter, still first in line, is woken to
    /// try a round of its own.
    ///
    /// The unlock returns once every release has ended, or a quorum of instances (a
    /// MultiLock: every lock) released and the others had twice as long again (at least
    /// 10 ms), or the slowest instance's response timeout passed: an instance that is down or
    /// frozen is not waited for. Its release goes on in the background (the client's
    /// [`shutdown`](Client::shutdown) waits for it), and what it says is logged.
    ///
    /// # Cancel safety
    ///
    /// Dropped midway, every hold is still released (or passed on) in the background, as
    /// [`HoldGuard::unlock`] does, and a hold passed on to a waiter that never got it is
    /// released.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] when the guard itself was lost (fewer than a quorum held, or its
    /// validity over); [`Error::Unfinished`] when fewer than a quorum of instances (a
    /// MultiLock: not every lock) confirmed the release in time, naming each instance that did
    /// not and why (its hold then ends with its lease). A guard that held its quorum unlocks
    /// with `Ok` however many instances beyond the quorum were down or had lost their hold.
    pub async fn unlock(self) -> Result<()> {
        let lost = self.loss_reason();
        let Self {
            guards,
            quorum,
            gate,
            ..
        } = self;
        let count = guards.len();
        let claim = gate
            .as_ref()
            .filter(|_| lost.is_none())
            .and_then(|gate| gate.claim());
        // The holds passed on start their leases when their scripts run, after this.
        let started = Instant::now();
        let lease = claim.as_ref().map(|c| c.need().lease);
        let ended = end_all(guards, lease, quorum).await;
        let released = ended.released;
        match (claim, &gate) {
            (Some(claim), Some(gate)) => deliver(claim, ended.passed, quorum, gate, started).await,
            _ => {
                if let Some(gate) = &gate {
                    gate.freed(&ended.reached);
                }
            }
        }
        if let Some(reason) = lost {
            if !ended.failures.is_empty() {
                tracing::debug!(failures = %ended.failures.join("; "), "releasing a lost MultiLock/RedLock guard");
            }
            return Err(Error::LeaseLost(reason));
        }
        if released >= quorum {
            if !ended.failures.is_empty() {
                tracing::info!(
                    released,
                    quorum,
                    failures = %ended.failures.join("; "),
                    "unlocked with a quorum; instances that did not release end their holds with their lease"
                );
            }
            return Ok(());
        }
        tracing::warn!(released, quorum, failures = %ended.failures.join("; "), "unlock short of a quorum");
        Err(Error::Unfinished(format!(
            "released on {released} of {count} instances, fewer than the {quorum} needed ({}); the holds left end with their lease",
            ended.failures.join("; ")
        )))
    }
}

/// What [`end_all`] came to.
pub(super) struct Ended {
    /// Instances that released (or passed their hold on).
    pub(super) released: usize,
    /// The holds passed on to a waiter.
    pub(super) passed: Vec<HoldGuard>,
    /// Each instance that did not release in time, and why.
    pub(super) failures: Vec<String>,
    /// The subscriber connections each instance's release message reached, by index.
    pub(super) reached: Vec<(usize, u64)>,
}

/// Ends every hold of `guards` at once: released, or (`lease` given: a waiter's) handed on to
/// a fresh owner with that lease. Each release runs in a task of its client's (tracked by its
/// [`shutdown`](Client::shutdown)), so that one not waited for still finishes. Returns once
/// every one ended, or `quorum` of them released and the others had twice as long again (at
/// least 10 ms), or the slowest client's response timeout passed; a release that ends later
/// logs what it says, and a hold passed on then is released.
pub(super) async fn end_all(
    guards: Vec<HoldGuard>,
    lease: Option<Option<Duration>>,
    quorum: usize,
) -> Ended {
    let bound = guards
        .iter()
        .map(|g| g.client().config().response_timeout())
        .max()
        .unwrap_or_default();
    let started = Instant::now();
    let mut deadline = ferrisson_core::__engine::time::later(started, bound);
    let mut waiting_for: Vec<String> = guards.iter().map(|g| g.key().to_owned()).collect();
    let mut pending: FuturesUnordered<_> = guards
        .into_iter()
        .enumerate()
        .map(|(i, guard)| end_one(i, guard, lease))
        .collect();
    let mut ended = Ended {
        released: 0,
        passed: Vec::new(),
        failures: Vec::new(),
        reached: Vec::new(),
    };
    let mut reached = false;
    loop {
        let (i, outcome) = match tokio::time::timeout_at(deadline, pending.next()).await {
            Ok(Some(next)) => next,
            Ok(None) => break,
            Err(_) => break,
        };
        let key = waiting_for
            .get_mut(i)
            .map(std::mem::take)
            .unwrap_or_default();
        match outcome {
            Ok((passed, reached)) => {
                ended.released += 1;
                ended.passed.extend(passed);
                ended.reached.push((i, reached));
            }
            Err(e) => ended.failures.push(format!("`{key}`: {e}")),
        }
        if ended.released >= quorum && !reached {
            reached = true;
            // The other instances, if they are up, answer about as fast: they get twice the
            // time the quorum took (at least 10 ms), not the response timeout a frozen or
            // unreachable one would take.
            deadline = deadline.min(ferrisson_core::__engine::time::later(
                Instant::now(),
                started
                    .elapsed()
                    .saturating_mul(2)
                    .max(Duration::from_millis(10)),
            ));
        }
    }
    if !reached {
        for key in waiting_for.iter().filter(|k| !k.is_empty()) {
            ended.failures.push(format!(
                "`{key}`: no answer within {bound:?} (still being released in the background)"
            ));
        }
    }
    ended
}

/// Ends hold `i`, `guard`: released, or handed on with `lease` when given, in a task of its
/// client's. Its outcome comes back unless the caller stopped waiting: then a failure is
/// logged, and a hold passed on is released.
pub(super) fn end_one(
    i: usize,
    guard: HoldGuard,
    lease: Option<Option<Duration>>,
) -> impl std::future::Future<Output = (usize, Result<(Option<HoldGuard>, u64)>)> {
    let key = guard.key().to_owned();
    let client = guard.client().clone();
    let (tx, rx) = tokio::sync::oneshot::channel::<Result<(Option<HoldGuard>, u64)>>();
    let spawned = client.spawn_cleanup(async move {
        let result = match lease {
            Some(lease) => guard.hand_off(lease).await.map(|passed| (passed, 0)),
            None => guard.unlock_reaching().await.map(|reached| (None, reached)),
        };
        // Not waited for any more: nobody else will hear of it.
        match tx.send(result) {
            Ok(()) | Err(Ok((None, _))) => {}
            Err(Ok((Some(late), _))) => {
                if let Err(e) = late.unlock().await {
                    tracing::debug!(%key, error = %e, "releasing a hold passed on too late");
                }
            }
            Err(Err(e)) => {
                tracing::info!(%key, error = %e, "an instance's release ended after the unlock returned: its hold ends with its lease");
            }
        }
    });
    async move {
        let outcome = if spawned {
            rx.await
                .unwrap_or(Err(Error::Closed("the release task stopped")))
        } else {
            Err(Error::Closed("no Tokio runtime to release on"))
        };
        (i, outcome)
    }
}

/// Hands the claimed waiter the holds `passed` on to it, when they are a quorum; otherwise
/// releases them, and the claim, dropped, wakes the waiter to try again. The holds travel as
/// the engine's hand-off carries them ([`Taken::Holds`]: each by its lock's place in the
/// gate); a waiter that has gone meanwhile leaves them to the grant's undo, which releases
/// them.
pub(super) async fn deliver(
    claim: Claim,
    passed: Vec<HoldGuard>,
    quorum: usize,
    gate: &Gate,
    since: Instant,
) {
    if passed.len() < quorum {
        tracing::debug!(
            passed = passed.len(),
            quorum,
            "a RedLock hand-off reached fewer than a quorum: released"
        );
        drop(claim);
        release_all(passed).await;
        return;
    }
    let mut holds = Vec::with_capacity(passed.len());
    let mut locks = Vec::with_capacity(passed.len());
    for guard in passed {
        let Some(place) = gate.place_of(guard.client().id(), guard.key()) else {
            // Not one of the gate's locks (never: the guard's holds are its group's).
            drop(guard);
            continue;
        };
        if let Some((lock, hold)) = guard.into_handed() {
            holds.push((place, hold));
            locks.push(lock);
        }
    }
    let grant = Grant::new(Taken::Holds { holds, since }, move |taken| {
        // Not taken: every hold is released (in the background, as a dropped guard is).
        if let Taken::Holds { holds, .. } = taken {
            for (lock, (_, hold)) in locks.iter().zip(holds) {
                drop(lock.adopt(hold));
            }
        }
    });
    // A waiter gone meanwhile gives the grant back: dropped, it releases.
    drop(claim.deliver(grant));
}

/// Releases holds taken in a round that failed, all at once.
pub(super) async fn release_all(guards: Vec<HoldGuard>) {
    let results = futures::future::join_all(guards.into_iter().map(HoldGuard::unlock)).await;
    for result in results {
        if let Err(e) = result {
            tracing::debug!(error = %e, "releasing a hold of a failed round");
        }
    }
}
