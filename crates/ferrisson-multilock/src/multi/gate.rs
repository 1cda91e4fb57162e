//! The group's settings and the gate its waiters of one process take turns at.

use super::*;
use ferrisson_core::__engine::{Claim, LocalPlace, LocalWaiters, Need, Takes};

/// How long one round of an unbounded wait lasts per lock before a MultiLock starts over
/// (Redisson's `baseWaitTime`: 1.5 s per lock).
pub(super) const ROUND_PER_LOCK: Duration = Duration::from_millis(1_500);

/// The clock drift a RedLock allows for: 1 % of the lease plus 2 ms (the RedLock description's
/// and rslock's rule).
pub(super) fn drift(lease: Duration) -> Duration {
    lease / 100 + Duration::from_millis(2)
}

pub(super) struct Group {
    pub(super) locks: Vec<Box<dyn AnyLock>>,
    /// How many must be held: all of them (MultiLock) or a majority (RedLock).
    pub(super) quorum: usize,
    pub(super) red: bool,
    /// A RedLock's turn to wait, shared by every RedLock of this process over the same locks
    /// of the same clients ([`gate`]): of the acquisitions that found the lock held, only the
    /// one holding the permit watches and retries; the others queue for it, first come first
    /// served.
    pub(super) gate: Option<Arc<Gate>>,
}

/// One step of the pause of a RedLock waiter woken by a release before its round
/// ([`woken_pause`]) while an instance gave no answer in its last round: a step less for each
/// doubling of how long it has waited.
pub(super) const WOKEN_STEP: Duration = Duration::from_micros(300);

/// The step while every instance answered its last round. With all of them up, rivals split
/// the instances so that none has a quorum only when there are more rivals than instances
/// less a quorum (three rivals one instance each, on three servers), and a failed round costs
/// one round trip: a long pause before every round cost more than the splits it prevented
/// (the `redlock` bench, contended, at 0.3 ms steps: 0.55–0.66 × rslock against 0.70–0.98 ×
/// at 30 µs, with the same order kept).
pub(super) const WOKEN_STEP_ALL_UP: Duration = Duration::from_micros(30);

/// How many doublings of a wait the pause tells apart: from 8 ms to about 16 s.
pub(super) const WOKEN_STEPS: u32 = 12;

/// The pause of a RedLock waiter woken by a release before its round: a step shorter for each
/// doubling of `waited` (from 8 ms), plus a random part below one step; the step is
/// [`WOKEN_STEP`], or [`WOKEN_STEP_ALL_UP`] when every instance answered its last round
/// (`all_up`). Every process computes the same rule, so the rivals one release woke (one
/// turn-holder per process, each its process's longest waiter) send their rounds longest
/// waiter first, and rarely split the instances between them: a RedLock with one instance
/// down needs both others, and a split round fails for both. Rivals within a doubling of each
/// other draw lots within the step.
pub(super) fn woken_pause(waited: Duration, all_up: bool) -> Duration {
    let step = if all_up {
        WOKEN_STEP_ALL_UP
    } else {
        WOKEN_STEP
    };
    let eighths = waited.as_millis() / 8 + 1;
    let doublings = 128 - eighths.leading_zeros();
    step.saturating_mul(WOKEN_STEPS.saturating_sub(doublings)) + random_below(step)
}

/// How long after freeing a RedLock that other processes wait for a process's fresh
/// acquisitions queue rather than try at once: long enough for the waiters its release woke to
/// hear it, pause ([`woken_pause`]: at most 3.6 ms) and send their round.
pub(super) const YIELD: Duration = Duration::from_millis(5);

/// The most RedLock acquisitions one process hands the lock to in a row before a release
/// frees it for the other processes' waiters (as [`ferrisson_core::__engine::MAX_HANDOFF_STREAK`]
/// for one lock).
pub(super) const MAX_RED_STREAK: u32 = 8;

/// What the RedLocks of one process over the same locks share: the turn to watch and retry,
/// and the acquisitions waiting, to which an unlock hands the lock straight on (on a local
/// channel of the engine's hub: its queue, claims and streak, as every kind's hand-off).
#[derive(Debug)]
pub(super) struct Gate {
    /// The turn to watch and retry (one permit).
    pub(super) turn: tokio::sync::Semaphore,
    /// Which locks of which clients, sorted: a lock's place here is how a hand-off names it.
    identity: Identity,
    /// The acquisitions waiting for a hand-off, oldest first, and the streak of hand-offs.
    waiters: LocalWaiters,
    /// When the outage the waiting turn's rounds are in began (fewer than a quorum of
    /// instances reachable), so that the waiters queued behind the turn count their outage
    /// limit from then too, not from their own first round.
    pub(super) outage_since: std::sync::Mutex<Option<Instant>>,
    /// Until when this process's fresh acquisitions queue instead of trying at once, after a
    /// release of its that other processes' waiters heard ([`Gate::freed`]).
    pub(super) yield_until: std::sync::Mutex<Option<Instant>>,
    /// The instance (by index) the turn-holder of this process watches for a release, if it
    /// watches one ([`red_pause`]): a release message it reached there is this process's own.
    pub(super) watching: std::sync::Mutex<Option<usize>>,
    /// The instances (by place) that gave no answer within their bound in their last round
    /// (down or frozen): a round gives them only the grace of a decided round once the others
    /// have answered, so that a RedLock does not hold its other instances for a response
    /// timeout per round while one is frozen ([`red_round`]).
    unanswered: Vec<std::sync::atomic::AtomicBool>,
}

impl Gate {
    /// The gate of the locks `identity` (sorted), whose waiters queue on `client`'s hub.
    pub(super) fn new(identity: Identity, client: &Client) -> Self {
        let len = identity.len();
        let name = identity
            .iter()
            .map(|(client, key)| format!("{client}\u{1}{key}"))
            .collect::<Vec<_>>()
            .join("\u{2}");
        Self {
            turn: tokio::sync::Semaphore::new(1),
            identity,
            waiters: LocalWaiters::new(client, &format!("redlock:{name}")),
            outage_since: std::sync::Mutex::new(None),
            yield_until: std::sync::Mutex::new(None),
            watching: std::sync::Mutex::new(None),
            unanswered: (0..len)
                .map(|_| std::sync::atomic::AtomicBool::new(false))
                .collect(),
        }
    }

    /// Whether the lock `key` of `client_id` gave no answer in its last round.
    pub(super) fn unanswered(&self, client_id: &str, key: &str) -> bool {
        self.place_of(client_id, key)
            .and_then(|place| self.unanswered.get(place))
            .is_some_and(|flag| flag.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Notes whether the lock `key` of `client_id` answered in a round.
    pub(super) fn answered(&self, client_id: &str, key: &str, answered: bool) {
        if let Some(flag) = self
            .place_of(client_id, key)
            .and_then(|place| self.unanswered.get(place))
        {
            flag.store(!answered, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// The place of the lock `key` of the client `client_id` in the gate's locks.
    pub(super) fn place_of(&self, client_id: &str, key: &str) -> Option<usize> {
        self.identity
            .binary_search_by(|(c, k)| (c.as_str(), k.as_str()).cmp(&(client_id, key)))
            .ok()
    }

    /// Which lock of the gate's is at `place`: its client's id and its key.
    pub(super) fn at(&self, place: usize) -> Option<(&str, &str)> {
        self.identity
            .get(place)
            .map(|(c, k)| (c.as_str(), k.as_str()))
    }

    pub(super) fn watching(&self) -> std::sync::MutexGuard<'_, Option<usize>> {
        self.watching
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(super) fn outage(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.outage_since
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues a waiter with `lease`: its place (which takes it out when dropped), where the
    /// hand-off arrives.
    pub(super) fn wait(&self, lease: Option<Duration>) -> LocalPlace {
        self.waiters.join(Need {
            count: 1,
            owner: None,
            lease,
            takes: Takes::Holds,
        })
    }

    /// Whether acquisitions of this process wait (for a hand-off or their turn).
    pub(super) fn has_waiters(&self) -> bool {
        self.waiters.has_waiters()
    }

    /// Whether this process freed the lock for others a moment ago ([`YIELD`]).
    pub(super) fn yielding(&self) -> bool {
        self.yield_until
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_some_and(|until| Instant::now() < until)
    }

    /// A release that freed the lock reached, on each instance (by index), that many
    /// subscriber connections: when one reached more than this process's own watcher (on the
    /// instance it watches), other processes wait, and this process's fresh acquisitions let
    /// the ones that message woke go first.
    pub(super) fn freed(&self, reached: &[(usize, u64)]) {
        let watched = *self.watching();
        let others = reached
            .iter()
            .map(|&(i, n)| n.saturating_sub(u64::from(watched == Some(i))))
            .max()
            .unwrap_or(0);
        if others > 0 {
            *self
                .yield_until
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) =
                Some(ferrisson_core::__engine::time::later(Instant::now(), YIELD));
        }
    }

    /// The oldest waiter still waiting, claimed for a hand-off, when the streak allows
    /// another (else the streak starts over: this release frees the lock for everyone).
    pub(super) fn claim(&self) -> Option<Claim> {
        self.waiters.claim(Takes::Holds, MAX_RED_STREAK)
    }
}

/// Which locks of which clients a RedLock is over: the sorted (client id, key) pairs.
pub(super) type Identity = Vec<(String, String)>;

/// The waiting turns of the process's RedLocks, by identity (which names the clients: no two
/// clients share a turn). An entry lives while a RedLock over its locks does.
static GATES: std::sync::Mutex<Option<std::collections::HashMap<Identity, std::sync::Weak<Gate>>>> =
    std::sync::Mutex::new(None);

/// The waiting turn of the RedLocks over `locks` (the same keys of the same clients, in any
/// order), one per process: each RedLock over them finds the same one ([`GATES`]), made on
/// first use, and forgotten once no RedLock uses it.
pub(super) fn gate(locks: &[Box<dyn AnyLock>]) -> Option<Arc<Gate>> {
    let mut identity: Identity = locks
        .iter()
        .map(|l| (l.client_id().to_owned(), l.key().to_owned()))
        .collect();
    identity.sort();
    let mut gates = GATES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let gates = gates.get_or_insert_with(std::collections::HashMap::new);
    if let Some(gate) = gates.get(&identity).and_then(std::sync::Weak::upgrade) {
        return Some(gate);
    }
    // Forget the gates no RedLock uses any more, every time the table doubles.
    if gates.len() >= 64 && gates.len().is_power_of_two() {
        gates.retain(|_, gate| gate.strong_count() > 0);
    }
    // The waiters queue on the hub of the first lock's client (in the sorted order: the same
    // for every RedLock over these locks).
    // (None for no locks: a RedLock is never made without, `check`.)
    let (c, k) = identity.first()?;
    let client = locks
        .iter()
        .find(|l| l.client_id() == c && l.key() == k)?
        .any_client();
    let gate = Arc::new(Gate::new(identity.clone(), client));
    gates.insert(identity, Arc::downgrade(&gate));
    Some(gate)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;

    #[test]
    fn a_longer_wait_pauses_less_after_a_release_and_every_pause_ends_within_the_yield_shorter_with_every_instance_up()
     {
        let waits = [0u64, 8, 40, 100, 300, 700, 1_500, 3_000, 7_000, 20_000];
        for pair in waits.windows(2) {
            let (young, old) = (pair[0], pair[1]);
            for all_up in [false, true] {
                for _ in 0..50 {
                    let young = woken_pause(Duration::from_millis(young), all_up);
                    let old = woken_pause(Duration::from_millis(old), all_up);
                    // Waits a doubling apart or more: the older one's round goes first.
                    assert!(old < young, "{old:?} after {young:?}");
                }
            }
        }
        for wait in [Duration::ZERO, Duration::from_secs(1), Duration::MAX] {
            let pause = woken_pause(wait, false);
            assert!(pause < WOKEN_STEP.saturating_mul(WOKEN_STEPS) && pause < YIELD);
            let pause = woken_pause(wait, true);
            assert!(pause < WOKEN_STEP_ALL_UP.saturating_mul(WOKEN_STEPS));
        }
    }
}
