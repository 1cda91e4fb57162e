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
