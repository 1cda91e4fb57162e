//! The group gate's model checks (`cargo test -p ferrisson-multilock --lib model_check`): the
//! gate's queue ([`queue`](super::queue)) built a second time, on shuttle's locks and atomics,
//! so that shuttle explores the interleavings of the threads that use it: thousands of random
//! and PCT schedules per scenario, every lock of the queue a scheduling point.
#![allow(clippy::unwrap_used, clippy::panic)]

/// shuttle's locks and atomics, in place of std's.
mod queue_sync {
    pub(crate) use shuttle::sync::atomic::{AtomicU32, AtomicU64};
    pub(crate) use shuttle::sync::{Mutex, MutexGuard};
}

/// This build uses only what the model checks reach. Loading the queue's file a second time is
/// the point (`clippy::duplicate_mod`).
#[allow(dead_code, clippy::duplicate_mod)]
#[path = "queue.rs"]
mod queue;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use queue::Queue;
use shuttle::thread;

const RANDOM_RUNS: usize = 2_000;
const PCT_RUNS: usize = 2_000;
const PCT_DEPTH: usize = 3;
const MAX_STREAK: u32 = 8;

/// Runs `scenario` under random schedules and under PCT schedules.
fn check(scenario: fn()) {
    shuttle::check_random(scenario, RANDOM_RUNS);
    shuttle::check_pct(scenario, PCT_RUNS, PCT_DEPTH);
}

/// What an unlock hands over: counts its own end, so that a check sees it end exactly once
/// (received by the waiter, or back with the unlocker, which releases it).
struct Handed(Arc<AtomicUsize>);

impl Drop for Handed {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// An unlock that hands the lock to the oldest waiter while that waiter leaves (its future
/// dropped: its place and its receiver go): the hand-off is received or comes back, exactly
/// once, and the queue is left with nobody waiting.
#[test]
fn a_hand_off_to_a_leaving_waiter_is_received_or_returned_exactly_once() {
    check(|| {
        let queue = Arc::new(Queue::<Handed>::new());
        let ended = Arc::new(AtomicUsize::new(0));
        let (place, mut rx) = queue.join(None);
        let unlocker = {
            let (queue, ended) = (queue.clone(), ended.clone());
            thread::spawn(move || match queue.next(MAX_STREAK) {
                Some(waiter) => match waiter.deliver(Handed(ended)) {
                    Ok(()) => 1,
                    // Back with the unlocker, which releases it (dropped here).
                    Err(back) => {
                        drop(back);
                        2
                    }
                },
                None => 0,
            })
        };
        let received = rx.try_recv().ok();
        let got = received.is_some();
        drop(received);
        drop(place);
        drop(rx);
        let outcome = unlocker.join().unwrap();
        let handed_off = usize::from(outcome != 0);
        assert_eq!(
            ended.load(Ordering::SeqCst),
            handed_off,
            "ended once per hand-off"
        );
        if got {
            assert_eq!(outcome, 1, "received, so delivered");
        }
        assert!(!queue.has_waiters(), "a waiter that left still counts");
    });
}

/// An unlock whose hand-off reached fewer than a quorum puts its waiter back at the head,
/// while another acquisition joins: the next unlock still serves the first waiter first.
#[test]
fn a_short_hand_off_puts_its_waiter_back_ahead_of_one_that_joins_meanwhile() {
    check(|| {
        let queue = Arc::new(Queue::<u32>::new());
        let (first, mut first_rx) = queue.join(None);
        let joiner = {
            let queue = queue.clone();
            thread::spawn(move || queue.join(None))
        };
        let short = queue.next(MAX_STREAK).unwrap();
        let first_id = short.id;
        queue.put_back(short);
        let (second, mut second_rx) = joiner.join().unwrap();
        let next = queue.next(MAX_STREAK).unwrap();
        assert_eq!(next.id, first_id, "the waiter put back is served first");
        next.deliver(7).unwrap();
        assert_eq!(first_rx.try_recv().unwrap(), 7);
        assert!(second_rx.try_recv().is_err(), "the joiner still waits");
        assert!(queue.has_waiters());
        drop((first, second));
        assert!(!queue.has_waiters());
    });
}

/// Two unlocks racing for the queue's one waiter: exactly one of them hands it the lock, the
/// other frees the lock for everyone; the streak never lets a process hand off more than its
/// bound in a row, whatever the interleaving.
#[test]
fn two_unlocks_never_hand_one_waiter_the_lock_twice() {
    check(|| {
        let queue = Arc::new(Queue::<u32>::new());
        let (_place, mut rx) = queue.join(None);
        let unlocks: Vec<_> = (0..2)
            .map(|i| {
                let queue = queue.clone();
                thread::spawn(move || {
                    queue
                        .next(MAX_STREAK)
                        .map(|waiter| waiter.deliver(i).is_ok())
                })
            })
            .collect();
        let served: Vec<_> = unlocks.into_iter().map(|u| u.join().unwrap()).collect();
        assert_eq!(
            served.iter().filter(|s| **s == Some(true)).count(),
            1,
            "one hand-off: {served:?}"
        );
        assert!(rx.try_recv().is_ok());
    });
}

/// The streak: `MAX_STREAK` hand-offs in a row, then one unlock frees the lock for everyone
/// (no waiter taken), and the streak starts over.
#[test]
fn the_streak_frees_the_lock_after_its_bound() {
    shuttle::check_random(
        || {
            let queue = Arc::new(Queue::<u32>::new());
            let places: Vec<_> = (0..=MAX_STREAK).map(|_| queue.join(None)).collect();
            for _ in 0..MAX_STREAK {
                assert!(queue.next(MAX_STREAK).is_some());
            }
            assert!(
                queue.next(MAX_STREAK).is_none(),
                "the streak's bound frees the lock"
            );
            assert!(queue.next(MAX_STREAK).is_some(), "and starts over");
            drop(places);
        },
        10,
    );
}
