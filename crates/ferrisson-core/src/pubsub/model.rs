//! Model checks of the claim/wake state machine: shuttle runs each scenario's threads under
//! thousands of schedules (random, and PCT, which finds bugs of small depth with a known
//! probability), every lock and flag of the hub a scheduling point.
#![allow(clippy::unwrap_used, clippy::panic)]

use super::*;
use shuttle::thread;

const CH: &str = "ch";
const RANDOM_RUNS: usize = 3_000;
const PCT_RUNS: usize = 3_000;
const PCT_DEPTH: usize = 3;

/// A waiter for a `u32` that needs `n`.
fn tag(n: u32) -> Option<Need> {
    Some(Need::permits(n))
}

/// Runs `scenario` under random schedules and under PCT schedules.
fn check(scenario: fn()) {
    shuttle::check_random(scenario, RANDOM_RUNS);
    shuttle::check_pct(scenario, PCT_RUNS, PCT_DEPTH);
}

/// The race the restart test found ([`races::try_vs_hand_off`](super::races)).
#[test]
fn a_try_and_a_hand_off_never_both_happen() {
    check(super::races::try_vs_hand_off);
}

/// A hand-off racing the waiter's leave (its future dropped): either the waiter is still
/// there and the hand-off lands in its slot, where leaving drops it (which undoes it), or
/// the releaser gets it back; it is undone exactly once either way, and never both
/// delivered and returned.
#[test]
fn a_hand_off_to_a_leaving_waiter_is_undone_exactly_once() {
    check(|| {
        let hub = Arc::new(Hub::detached());
        let waiter = hub.subscribe(CH, lock_message_policy, tag(1));
        let undone = Arc::new(AtomicUsize::new(0));
        let releaser = {
            let (hub, undone) = (hub.clone(), undone.clone());
            thread::spawn(move || {
                hub.claim(CH, Takes::Permits, MAX_HANDOFF_STREAK)
                    .map(|claim| claim.deliver(counting_grant(undone)).is_ok())
            })
        };
        drop(waiter);
        let outcome = releaser.join().unwrap();
        let expected = usize::from(outcome.is_some());
        assert_eq!(undone.load(Ordering::SeqCst), expected);
        assert_eq!(hub.stats(), (0, 0));
    });
}

/// A lock release's one wake-up is never swallowed by a waiter that leaves at the same
/// moment (served already, so leaving alone does not pass the baton): the next waiter ends
/// up woken.
#[test]
fn a_leaving_waiter_never_swallows_the_one_wake_up() {
    check(|| {
        let hub = Arc::new(Hub::detached());
        let first = hub.subscribe(CH, lock_message_policy, None);
        let second = hub.subscribe(CH, lock_message_policy, None);
        first.satisfied();
        let publisher = {
            let hub = hub.clone();
            thread::spawn(move || hub.shared.message(CH, b"0"))
        };
        drop(first);
        publisher.join().unwrap();
        assert!(
            second.slot.pending.load(Ordering::SeqCst),
            "the wake-up was lost"
        );
    });
}

/// Two releases while the client lets one pass: one wakes the waiter deferred, the other
/// for real, in either order and while the waiter takes its wake-ups; the real one is
/// never lost or turned into a deferred one.
#[test]
fn a_real_wake_up_is_never_lost_to_a_deferred_one() {
    check(|| {
        let hub = Arc::new(Hub::detached());
        let waiter = hub.subscribe(CH, lock_message_policy, tag(1));
        assert!(hub.claim_turn(CH, Takes::Permits, 0).is_none());
        let publishers: Vec<_> = (0..2)
            .map(|_| {
                let hub = hub.clone();
                thread::spawn(move || hub.shared.message(CH, b"0"))
            })
            .collect();
        let mut real = 0;
        let mut take = |waiter: &Subscription| {
            if let Some(Woken::Notified) = waiter.take_wake_up() {
                real += 1;
            }
        };
        take(&waiter);
        thread::yield_now();
        take(&waiter);
        for p in publishers {
            p.join().unwrap();
        }
        take(&waiter);
        assert!(real >= 1, "the real wake-up was lost");
    });
}

/// A claim that fails (dropped without a delivery) while a release message arrives: the
/// message skipped the claimed waiter, so dropping the claim wakes it.
#[test]
fn a_waiter_skipped_while_claimed_is_woken_when_the_claim_fails() {
    check(|| {
        let hub = Arc::new(Hub::detached());
        let waiter = hub.subscribe(CH, lock_message_policy, tag(1));
        let releaser = {
            let hub = hub.clone();
            thread::spawn(move || drop(hub.claim(CH, Takes::Permits, MAX_HANDOFF_STREAK)))
        };
        let publisher = {
            let hub = hub.clone();
            thread::spawn(move || hub.shared.message(CH, b"0"))
        };
        releaser.join().unwrap();
        publisher.join().unwrap();
        assert!(
            waiter.slot.pending.load(Ordering::SeqCst),
            "the wake-up was lost"
        );
    });
}

/// A RedLock gate's waiter: on a local channel, for holds of several locks.
fn local_waiter(hub: &Hub) -> Subscription {
    hub.subscribe_local(
        LOCAL,
        Need {
            count: 1,
            owner: None,
            lease: None,
            takes: Takes::Holds,
        },
    )
}

const LOCAL: &str = "\u{0}local";

/// The group gate (a RedLock's waiters of one process, on a local channel): two unlocks at
/// once never hand one waiter the lock twice; with two waiters, each gets at most one, and
/// what is not delivered comes back to its unlocker, undone exactly once.
#[test]
fn the_group_gate_never_hands_one_waiter_the_lock_twice() {
    check(|| {
        let hub = Arc::new(Hub::detached());
        let waiter = local_waiter(&hub);
        let undone = Arc::new(AtomicUsize::new(0));
        let unlockers: Vec<_> = (0..2)
            .map(|_| {
                let (hub, undone) = (hub.clone(), undone.clone());
                thread::spawn(move || {
                    hub.claim(LOCAL, Takes::Holds, MAX_HANDOFF_STREAK)
                        .map(|claim| claim.deliver(counting_holds(undone)).is_ok())
                })
            })
            .collect();
        let delivered = unlockers
            .into_iter()
            .map(|u| u.join().unwrap())
            .filter(|d| *d == Some(true))
            .count();
        assert_eq!(delivered, 1, "one waiter, one hand-off");
        assert_eq!(undone.load(Ordering::SeqCst), 0);
        assert!(matches!(waiter.slot.take_handoff(), Some(g) if g.takes() == Takes::Holds));
        drop(waiter);
        assert_eq!(hub.stats(), (0, 0));
    });
}

/// The group gate's hand-off racing its waiter's leave (its acquisition dropped): undone
/// exactly once, whether it landed in the slot or came back to the unlocker.
#[test]
fn the_group_gate_undoes_a_hand_off_to_a_leaving_waiter_exactly_once() {
    check(|| {
        let hub = Arc::new(Hub::detached());
        let waiter = local_waiter(&hub);
        let undone = Arc::new(AtomicUsize::new(0));
        let unlocker = {
            let (hub, undone) = (hub.clone(), undone.clone());
            thread::spawn(move || {
                hub.claim(LOCAL, Takes::Holds, MAX_HANDOFF_STREAK)
                    .map(|claim| drop(claim.deliver(counting_holds(undone))))
            })
        };
        drop(waiter);
        let claimed = unlocker.join().unwrap().is_some();
        assert_eq!(undone.load(Ordering::SeqCst), usize::from(claimed));
        assert_eq!(hub.stats(), (0, 0));
    });
}

/// The group gate's streak: after `max` hand-offs in a row, an unlock frees the lock for
/// everyone (no claim), and the streak starts over; a waiter joining meanwhile changes
/// nothing of it.
#[test]
fn the_group_gate_frees_the_lock_after_its_streak() {
    check(|| {
        const MAX: u32 = 2;
        let hub = Arc::new(Hub::detached());
        let waiter = local_waiter(&hub);
        let joiner = {
            let hub = hub.clone();
            thread::spawn(move || drop(local_waiter(&hub)))
        };
        // Each claim dropped undelivered wakes its waiter, which takes the wake-up (and would
        // try again): then it is free for the next.
        for _ in 0..MAX {
            assert!(hub.claim(LOCAL, Takes::Holds, MAX).is_some());
            assert!(waiter.take_wake_up().is_some());
        }
        assert!(hub.claim(LOCAL, Takes::Holds, MAX).is_none(), "the streak ran out");
        assert!(hub.claim(LOCAL, Takes::Holds, MAX).is_some(), "it starts over");
        joiner.join().unwrap();
    });
}

/// A grant of holds whose undo counts in `undone`.
fn counting_holds(undone: Arc<AtomicUsize>) -> Grant {
    Grant::new(
        Taken::Holds {
            holds: Vec::new(),
            since: tokio::time::Instant::now(),
        },
        move |_| {
            undone.fetch_add(1, Ordering::SeqCst);
        },
    )
}
