//! Race scenarios run both on real threads (unit tests) and under shuttle's schedules
//! (model checks): the locks, flags and threads are std's or shuttle's, as the parent module of
//! this build of the hub picks.
#![allow(clippy::unwrap_used, clippy::panic)]

use super::sync::thread;
use super::*;

const CH: &str = "ch";

/// A waiter's retried try and a releaser's claim and hand-off. The waiter never both
/// tries and receives a hand-off for the same round: either its try runs (no claim could
/// be made meanwhile) or it finds the claim and takes the hand-off instead. A hand-off
/// delivered is received exactly once (after the try ended, on the next round), and a
/// claim always ends in a delivery.
pub(super) fn try_vs_hand_off() {
    let hub = Arc::new(Hub::detached());
    let waiter = hub.subscribe(CH, lock_message_policy, Some(Need::permits(1)));
    let trying = Arc::new(AtomicBool::new(false));
    let releaser = {
        let (hub, trying) = (hub.clone(), trying.clone());
        thread::spawn(
            move || match hub.claim(CH, Takes::Permits, MAX_HANDOFF_STREAK) {
                Some(claim) => {
                    assert!(!trying.load(Ordering::SeqCst), "claimed while trying");
                    claim.deliver(test_grant(1)).is_ok()
                }
                None => false,
            },
        )
    };
    let mut received = 0;
    let claimed = match waiter.begin_try() {
        Ok(guard) => {
            trying.store(true, Ordering::SeqCst);
            thread::yield_now();
            assert!(
                !waiter.slot.claimed.load(Ordering::SeqCst),
                "trying while claimed"
            );
            trying.store(false, Ordering::SeqCst);
            drop(guard);
            false
        }
        Err(Some(_)) => {
            received += 1;
            true
        }
        Err(None) => true,
    };
    let delivered = releaser.join().unwrap();
    if claimed {
        assert!(delivered, "claimed but nothing delivered");
    }
    if let Err(Some(_)) = waiter.begin_try() {
        received += 1;
    }
    assert_eq!(received, usize::from(delivered));
}
