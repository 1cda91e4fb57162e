//! Acquiring a group: its rounds, as the engine's round loop drives them.

use super::*;

/// How long a MultiLock holding some of its locks waits for the next one in round `round`:
/// 50 ms, doubling each round, at most 1.5 s.
pub(super) fn held_wait(round: u32) -> Duration {
    let factor = 1u32.checked_shl(round.min(5)).unwrap_or(32);
    Duration::from_millis(50)
        .saturating_mul(factor)
        .min(ROUND_PER_LOCK)
}

/// A random pause before round `round` starts over, so that colliding MultiLocks drift apart:
/// up to 10 ms per round so far, at most 200 ms.
pub(super) fn jitter(round: u32) -> Duration {
    random_below(Duration::from_millis(10).saturating_mul(round.min(20)))
}

/// A random duration below `span` (in whole microseconds; zero for a span under 1 µs).
pub(super) fn random_below(span: Duration) -> Duration {
    let span = span.as_micros().max(1);
    let random = uuid::Uuid::new_v4().as_u128();
    Duration::from_micros(u64::try_from(random % span).unwrap_or(0))
}

pub(super) async fn acquire(group: &Group, options: AcquireOptions) -> Result<Option<MultiGuard>> {
    options.validate()?;
    let wait = options.wait();
    let once = wait == Some(Duration::ZERO);
    let deadline = wait.and_then(ferrisson_core::__engine::time::deadline_after);
    // The outage rule of every wait, with the first lock's client's settings.
    let Some(first) = group.locks.first() else {
        return Ok(None);
    };
    let client = first.any_client();
    let what = ferrisson_core::__engine::Acquisition {
        client,
        kind: if group.red { "redlock" } else { "multilock" },
        key: first.key(),
        owner: None,
        permits: None,
        wait,
    };
    ferrisson_core::__engine::acquisition(what, |_progress| async move {
        let acquisition = Acquisition {
            group,
            options,
            once,
            since: Instant::now(),
            turn: None,
            handoff: None,
            refused: None,
        };
        drive(client, deadline, once, acquisition).await
    })
    .await
}

/// One acquisition's rounds, as the engine's one driver drives them ([`drive`]).
pub(super) struct Acquisition<'g> {
    pub(super) group: &'g Group,
    pub(super) options: AcquireOptions,
    pub(super) once: bool,
    /// When the acquisition began: how long it has waited decides its pause after a release
    /// ([`woken_pause`]).
    pub(super) since: Instant,
    /// A RedLock's turn to wait (taken after a first round that failed, kept until it returns).
    pub(super) turn: Option<tokio::sync::SemaphorePermit<'g>>,
    /// A RedLock waiter's place in its gate's queue, where an unlock in this process hands
    /// it the lock.
    pub(super) handoff: Option<LocalPlace>,
    /// A RedLock instance that refused the last round because someone holds it: what the
    /// pause before the next round watches.
    pub(super) refused: Option<usize>,
}

impl Acquisition<'_> {
    /// The gate whose outage this acquisition shares: a RedLock's, while it has the turn (the
    /// waiters queued behind it are in the same outage).
    pub(super) fn gate_in_turn(&self) -> Option<&Arc<Gate>> {
        self.group.gate.as_ref().filter(|_| self.turn.is_some())
    }
}

impl Rounds for Acquisition<'_> {
    type Output = MultiGuard;

    /// A RedLock round asks each instance once: a try like any other kind's, the first one
    /// the call's own (fewer than a quorum reached is the call's error), the later ones
    /// bounded as any try of a wait is. A MultiLock round's locks wait (and wait out outages)
    /// themselves: not cut, its connection error counted when it returns, from when its
    /// locks met the outage; the first round's error is the call's unless a lock of it
    /// reached Redis.
    fn pace(&self, n: u32) -> Pace {
        match (self.group.red, n) {
            (true, 0) => Pace::First,
            (true, _) => Pace::Paced,
            (false, _) => Pace::Unpaced,
        }
    }

    fn shared_outage(&self) -> Option<Instant> {
        self.gate_in_turn().and_then(|gate| *gate.outage())
    }

    fn share_outage(&self, since: Option<Instant>) {
        if let Some(gate) = self.gate_in_turn() {
            *gate.outage() = since;
        }
    }

    async fn round(
        &mut self,
        n: u32,
        started: Instant,
        deadline: Option<Instant>,
    ) -> Result<Option<MultiGuard>> {
        let group = self.group;
        self.refused = None;
        if n == 0
            && !self.once
            && group
                .gate
                .as_ref()
                .is_some_and(|g| g.has_waiters() || g.yielding())
        {
            // Acquisitions of this process wait already, or this process has just freed the
            // lock while other processes wait: this one queues behind them without a round (no
            // barging: a round sent at once would beat the waiters the release woke, which
            // pause before theirs, and a process whose tasks take the lock again at once would
            // keep it from every other process). When its turn comes, it watches the first
            // instance as a refused round would have it do.
            self.refused = Some(0);
            return Ok(None);
        }
        let taken = if group.red {
            // Queued for a hand-off: one that came already is taken instead of a round, and
            // one on its way is waited for (the pause gets it). An unlock may still claim it
            // during its round: the unlock's holds keep the round from a quorum, so the two
            // never both give it the lock, and a hand-off that lands once the round has
            // failed is what its pause takes.
            match self.handoff.as_ref().and_then(LocalPlace::handed_or_coming) {
                Some(Some(grant)) => return Ok(self.adopt(grant).await),
                Some(None) => return Ok(None),
                None => {}
            }
            red_round(group, self.options, &mut self.refused).await?
        } else {
            let round_end = deadline.unwrap_or_else(|| {
                let locks = u32::try_from(group.locks.len()).unwrap_or(u32::MAX);
                ferrisson_core::__engine::time::later(started, ROUND_PER_LOCK.saturating_mul(locks))
            });
            multi_round(group, self.options, self.once, round_end, n).await?
        };
        let Some(guards) = taken else {
            return Ok(None);
        };
        let valid_until = match (group.red, self.options.lease()) {
            (true, Some(lease)) => {
                let valid = lease
                    .saturating_sub(started.elapsed())
                    .saturating_sub(drift(lease));
                if valid.is_zero() {
                    tracing::debug!("the RedLock's validity ran out while acquiring: released");
                    release_all(guards).await;
                    return Ok(None);
                }
                Some(ferrisson_core::__engine::time::later(
                    started,
                    lease.saturating_sub(drift(lease)),
                ))
            }
            _ => None,
        };
        if let Some(place) = &self.handoff {
            // Served: its leaving wakes nobody.
            place.satisfied();
        }
        Ok(Some(MultiGuard {
            quorum: group.quorum,
            guards,
            valid_until: Validity::new(valid_until),
            gate: group.gate.clone(),
        }))
    }

    async fn between(
        &mut self,
        n: u32,
        failed: Option<Duration>,
        pacer: &mut WaitPacer<'_>,
    ) -> Result<Between<MultiGuard>> {
        if let Some(pause) = failed {
            // An outage: its back-off, nothing to watch.
            return Ok(if pacer.rest(pause).await? {
                Between::Again
            } else {
                Between::TimedOut
            });
        }
        self.pause_before(n, pacer).await
    }
}

impl Acquisition<'_> {
    /// The pause before round `n` (a round that failed without an outage): a RedLock's
    /// place in its gate's queue and its turn ([`wait_for_round`]), a MultiLock's jitter.
    async fn pause_before(
        &mut self,
        n: u32,
        pacer: &mut WaitPacer<'_>,
    ) -> Result<Between<MultiGuard>> {
        // A RedLock's waiter takes a place in its gate's queue once, kept until it returns:
        // an unlock in this process may hand it the lock ([`MultiGuard::unlock`]).
        if let (Some(gate), None) = (self.group.gate.as_ref(), &self.handoff) {
            self.handoff = Some(gate.wait(self.options.lease()));
        }
        let wait = wait_for_round(
            self.group,
            &mut self.turn,
            self.refused,
            n,
            self.since,
            pacer,
        );
        let Some(place) = self.handoff.as_ref() else {
            return wait.await;
        };
        let handed = tokio::select! {
            biased;
            handed = place.handed() => handed,
            step = wait => return step,
        };
        // Woken without the lock (a hand-off that fell short, a reconnect): try again.
        let Some(grant) = handed else {
            return Ok(Between::Again);
        };
        Ok(match self.adopt(grant).await {
            Some(guard) => Between::Ready(guard),
            None => Between::Again,
        })
    }

    /// The guard of the holds an unlock of this process handed over ([`deliver`]), each on
    /// this group's lock at its place in the gate; `None` (what came released) when they are
    /// fewer than a quorum, or the lease they were taken with has run out meanwhile.
    async fn adopt(&self, grant: Grant) -> Option<MultiGuard> {
        let group = self.group;
        let gate = group.gate.as_ref()?;
        let Taken::Holds { holds, since } = grant.accept() else {
            return None;
        };
        let guards: Vec<HoldGuard> = holds
            .into_iter()
            .filter_map(|(place, hold)| {
                let (client_id, key) = gate.at(place)?;
                let lock = group
                    .locks
                    .iter()
                    .find(|l| l.client_id() == client_id && l.key() == key)?;
                lock.hold_lock().adopt(hold)
            })
            .collect();
        let valid_until = self.options.lease().map(|lease| {
            ferrisson_core::__engine::time::later(since, lease.saturating_sub(drift(lease)))
        });
        if guards.len() < group.quorum || valid_until.is_some_and(|at| at <= Instant::now()) {
            release_all(guards).await;
            return None;
        }
        if let Some(place) = &self.handoff {
            place.satisfied();
        }
        Some(MultiGuard {
            quorum: group.quorum,
            guards,
            valid_until: Validity::new(valid_until),
            gate: group.gate.clone(),
        })
    }
}

/// The wait before the next round `round` of an acquisition that failed one: a RedLock's
/// acquisition first takes its turn ([`Gate`]), the one who has it watches for a release
/// ([`red_pause`]); a MultiLock's pauses at random ([`jitter`]). Bounded by `pacer` as every
/// wait's pause is: never past its deadline, ended by a shutdown.
pub(super) async fn wait_for_round<'g>(
    group: &'g Group,
    turn: &mut Option<tokio::sync::SemaphorePermit<'g>>,
    refused: Option<usize>,
    round: u32,
    since: Instant,
    pacer: &mut WaitPacer<'_>,
) -> Result<Between<MultiGuard>> {
    let deadline = pacer.deadline();
    if let Some(gate) = group.gate.as_ref().filter(|_| turn.is_none()) {
        // Only one acquisition of this process waits for this RedLock at a time: every
        // waiter watching and retrying would send a round to every instance per release
        // per waiter, most of them lost. The others queue here, in order; the one whose
        // turn comes after a wait in the queue starts with a fresh round, whose refusal
        // tells it what to watch.
        match gate.turn.try_acquire() {
            Ok(permit) => *turn = Some(permit),
            Err(tokio::sync::TryAcquireError::NoPermits) => {
                let queued = gate.turn.acquire();
                let permit = match deadline {
                    Some(d) => match pacer.pause(tokio::time::timeout_at(d, queued)).await? {
                        Ok(permit) => permit,
                        Err(_) => return Ok(Between::TimedOut),
                    },
                    None => pacer.pause(queued).await?,
                };
                if let Ok(permit) = permit {
                    *turn = Some(permit);
                    return Ok(Between::Again);
                }
            }
            // Never closed; were it, the waiter would wait unqueued.
            Err(tokio::sync::TryAcquireError::Closed) => {}
        }
    }
    let pause = if group.red {
        red_pause(group, refused, round, since, deadline).await
    } else {
        jitter(round)
    };
    // The engine's rest: never past the deadline, ended by a shutdown.
    Ok(if pacer.rest(pause).await? {
        Between::Again
    } else {
        Between::TimedOut
    })
}

/// Between two RedLock rounds: waits until `refused` (an instance that refused because someone
/// held it, by index; one is enough, a holder releases every instance at once, and each watch
/// costs its instance a look and a subscription) is seen free (its release message, or its
/// holder's lease running out: [`Lock::wait_unlocked`], which never polls where releases
/// publish), then answers a pause shorter the longer the acquisition has waited (`since`
/// it began: [`woken_pause`]), which orders the rivals the same release woke, so that they do
/// not split the instances between them. When there is nothing to watch (the round failed on
/// instances that are down or slow) or the watch fails, it answers the blind pause of
/// [`jitter`]; it never waits past `deadline`.
pub(super) async fn red_pause(
    group: &Group,
    refused: Option<usize>,
    round: u32,
    since: Instant,
    deadline: Option<Instant>,
) -> Duration {
    let freed = async {
        let Some((i, lock)) = refused.and_then(|i| group.locks.get(i).map(|l| (i, l))) else {
            return false;
        };
        let _watching = group.gate.as_deref().map(|gate| Watching::start(gate, i));
        match lock.wait_unlocked_any().await {
            Ok(()) => true,
            Err(e) => {
                tracing::debug!(key = lock.key(), error = %e, "a RedLock instance cannot be watched");
                false
            }
        }
    };
    let freed = match deadline {
        Some(d) => tokio::time::timeout_at(d, freed).await.unwrap_or(false),
        None => freed.await,
    };
    if freed {
        // The longest waiter first: the turn-holders of other processes, woken by the same
        // message, compute the same rule (a span growing with the rounds would favour the
        // youngest waiter, often the releasing process's next one).
        // (With every instance up, a short step: a split then needs more rivals.)
        let all_up = group.gate.as_deref().is_some_and(|g| {
            group
                .locks
                .iter()
                .all(|l| !g.unanswered(l.client_id(), l.key()))
        });
        woken_pause(since.elapsed(), all_up)
    } else {
        jitter(round)
    }
}

/// This process's turn-holder watching instance `i` of its RedLock ([`Gate::freed`]), until
/// dropped.
pub(super) struct Watching<'g>(&'g Gate);

impl<'g> Watching<'g> {
    pub(super) fn start(gate: &'g Gate, i: usize) -> Self {
        *gate.watching() = Some(i);
        Self(gate)
    }
}

impl Drop for Watching<'_> {
    fn drop(&mut self) {
        *self.0.watching() = None;
    }
}

/// One MultiLock round: every lock in order, each within the time left. `None`: one could not
/// be had (what was taken is released).
pub(super) async fn multi_round(
    group: &Group,
    options: AcquireOptions,
    once: bool,
    round_end: Instant,
    round: u32,
) -> Result<Option<Vec<HoldGuard>>> {
    let mut guards = Vec::with_capacity(group.locks.len());
    for lock in &group.locks {
        let left = round_end.saturating_duration_since(Instant::now());
        let wait = if once {
            Duration::ZERO
        } else if guards.is_empty() {
            // Holding nothing, a wait blocks nobody.
            left
        } else {
            // Holding locks, a long wait could deadlock with a MultiLock asking in another
            // order: wait a little (longer each round), then start over.
            left.min(held_wait(round))
        };
        let mut lock_options = AcquireOptions::new().with_wait(wait);
        if let Some(lease) = options.lease() {
            lock_options = lock_options.with_lease(lease);
        }
        match lock.acquire_any(lock_options).await {
            Ok(Some(guard)) => guards.push(guard),
            Ok(None) => {
                release_all(guards).await;
                return Ok(None);
            }
            Err(e) => {
                release_all(guards).await;
                return Err(e);
            }
        }
    }
    Ok(Some(guards))
}

/// One RedLock round: every instance asked once, all at once, each bounded by a share of the
/// lease (at most its response timeout). `None`: fewer than a quorum granted (what was granted
/// is released), and `refused` the first instance that refused because someone holds it.
/// Instances are not waited on: a waiting instance would hold its grant while others wait for
/// theirs, and rival RedLocks splitting the instances between them would wait each other out;
/// a failed round is retried after a pause instead ([`red_pause`]).
pub(super) async fn red_round(
    group: &Group,
    options: AcquireOptions,
    refused: &mut Option<usize>,
) -> Result<Option<Vec<HoldGuard>>> {
    let gate = group.gate.as_deref();
    // The instances that gave no answer in their last round: the others do not wait for them
    // past the grace once they have answered themselves (unless too few others are left to
    // make a quorum, or none: then every instance has its full bound, as it would anyway).
    let suspect: Vec<bool> = group
        .locks
        .iter()
        .map(|l| gate.is_some_and(|g| g.unanswered(l.client_id(), l.key())))
        .collect();
    let trusted = suspect.iter().filter(|s| !**s).count();
    let shortcut = trusted >= group.quorum && trusted < group.locks.len();
    // The trusted instances still out (only counted when the shortcut applies).
    let mut trusted_out = trusted;
    let attempts = group.locks.iter().enumerate().map(|(i, lock)| {
        let mut lock_options = AcquireOptions::new().with_wait(Duration::ZERO);
        let lease = options.lease().unwrap_or_else(|| lock.client_lease());
        if let Some(lease) = options.lease() {
            lock_options = lock_options.with_lease(lease);
        }
        // A slow instance must not eat the validity. A tenth under the response timeout: a
        // try is cut one response timeout after its deadline (`first_try`), and a round
        // whose other instances answered must be decided by its own bound before that cut,
        // or a `try_lock` that met a frozen instance would end in an error, not in `None`.
        let bound = lock.response_timeout().min(lease / 4);
        let bound = bound.saturating_sub(bound / 10);
        async move {
            // An instance that is down answers at once (its refusal is not asked again): the
            // round cannot wait for it while it holds the others.
            let attempt = refusal_ends_calls(lock.acquire_any(lock_options));
            let outcome = match tokio::time::timeout(bound, attempt).await {
                Ok(Ok(Some(guard))) => Instance::Granted(guard),
                Ok(Ok(None)) => Instance::Refused(i),
                Ok(Err(e)) => {
                    tracing::debug!(key = lock.key(), error = %e, "a RedLock instance refused or failed");
                    Instance::Failed(e)
                }
                Err(_) => {
                    tracing::debug!(key = lock.key(), "a RedLock instance did not answer in time");
                    Instance::Failed(no_reply(lock.any_client(), bound))
                }
            };
            (i, outcome)
        }
    });
    let mut granted: Vec<HoldGuard> = Vec::with_capacity(group.locks.len());
    let mut answered = 0usize;
    let mut failure = None;
    // Once the round is decided (a quorum granted, or no quorum possible any more), the
    // instances still out get twice the time the decision took (at least 10 ms), as
    // `end_all` gives them, not their response timeout: one that is down, or frozen, must
    // not hold up every round. Those dropped then undo what they may take (an acquisition's
    // cancel safety), and a hold they would have added is not needed. The same grace starts
    // once every instance that answered its last round has answered this one: the rest gave
    // no answer then, and waiting for them would hold this round's grants from its rivals.
    let started = Instant::now();
    let mut pending: FuturesUnordered<_> = attempts.collect();
    let mut grace: Option<Instant> = None;
    // Which instances answered (the others, still out when the round ended, did not).
    let mut heard = vec![false; group.locks.len()];
    loop {
        let next = match grace {
            Some(until) => match tokio::time::timeout_at(until, pending.next()).await {
                Ok(next) => next,
                Err(_) => break,
            },
            None => pending.next().await,
        };
        let Some((i, outcome)) = next else {
            break;
        };
        // An instance whose connection failed (down, refused, no reply in time) did not answer.
        let unreachable = matches!(&outcome, Instance::Failed(e) if e.is_connection_error());
        if let Some(h) = heard.get_mut(i) {
            *h = !unreachable;
        }
        if !suspect.get(i).copied().unwrap_or(true) {
            trusted_out = trusted_out.saturating_sub(1);
        }
        match outcome {
            Instance::Granted(guard) => {
                answered += 1;
                granted.push(guard);
            }
            Instance::Refused(held) => {
                answered += 1;
                // The first in the instances' order, whatever order they answered in: the
                // watchers of every process watch the same instance.
                *refused = Some(refused.map_or(held, |r| r.min(held)));
            }
            // A connection error weighs more than another failure: it is what the wait's
            // outage rule waits out.
            Instance::Failed(e) => {
                if failure
                    .as_ref()
                    .is_none_or(|f: &Error| !f.is_connection_error() || e.is_connection_error())
                {
                    failure = Some(e);
                }
            }
        }
        if grace.is_none()
            && (granted.len() >= group.quorum
                || granted.len() + pending.len() < group.quorum
                || (shortcut && trusted_out == 0))
        {
            grace = Some(ferrisson_core::__engine::time::later(
                Instant::now(),
                started
                    .elapsed()
                    .saturating_mul(2)
                    .max(Duration::from_millis(10)),
            ));
        }
    }
    if let Some(gate) = gate {
        for (lock, heard) in group.locks.iter().zip(&heard) {
            gate.answered(lock.client_id(), lock.key(), *heard);
        }
    }
    drop(pending);
    if granted.len() >= group.quorum {
        return Ok(Some(granted));
    }
    release_all(granted).await;
    // Fewer than a quorum could even answer: no round can succeed until they are back.
    match failure {
        Some(e) if answered < group.quorum => Err(e),
        _ => Ok(None),
    }
}

/// What one RedLock instance did in a round.
pub(super) enum Instance {
    /// Granted: its hold.
    Granted(HoldGuard),
    /// Held by someone else (the instance's index, to watch).
    Refused(usize),
    /// Failed or did not answer in time.
    Failed(Error),
}

/// Until when a RedLock with a fixed lease is valid (`None`: no fixed lease), shared by the
/// guard and its loss futures: an extension moves both, and a loss future asleep on the old
/// validity wakes to the new one (earlier or later).
#[derive(Debug)]
pub(super) struct Validity(pub(super) tokio::sync::watch::Sender<Option<Instant>>);

impl Validity {
    pub(super) fn new(at: Option<Instant>) -> Self {
        Self(tokio::sync::watch::Sender::new(at))
    }

    pub(super) fn get(&self) -> Option<Instant> {
        *self.0.borrow()
    }

    pub(super) fn set(&self, at: Instant) {
        self.0.send_replace(Some(at));
    }

    /// Resolves when the validity is over, following extensions; never without one. Once the
    /// guard is gone, the last validity stands.
    pub(super) fn expired(&self) -> impl std::future::Future<Output = LossReason> + Send + 'static {
        self.watch().expired()
    }

    /// The validity as it goes on, borrowing nothing (for a scoped work's hold).
    pub(super) fn watch(&self) -> ValidityWatch {
        ValidityWatch(self.0.subscribe())
    }
}

/// A [`Validity`] followed from afar: its current end, and its expiry.
#[derive(Debug, Clone)]
pub(super) struct ValidityWatch(tokio::sync::watch::Receiver<Option<Instant>>);

impl ValidityWatch {
    pub(super) fn get(&self) -> Option<Instant> {
        *self.0.borrow()
    }

    /// As [`Validity::expired`].
    pub(super) fn expired(
        &self,
    ) -> impl std::future::Future<Output = LossReason> + Send + 'static + use<> {
        let mut changes = self.0.clone();
        async move {
            loop {
                let at = *changes.borrow_and_update();
                let Some(at) = at else {
                    if changes.changed().await.is_err() {
                        return std::future::pending().await;
                    }
                    continue;
                };
                if at <= Instant::now() {
                    return LossReason::LeaseExpired;
                }
                tokio::select! {
                    () = tokio::time::sleep_until(at) => {}
                    changed = changes.changed() => {
                        if changed.is_err() {
                            tokio::time::sleep_until(at).await;
                        }
                    }
                }
            }
        }
    }
}
