//! The claim/wake state machine, without Redis: who a message wakes, who a releaser may
//! claim, and the race of a waiter's own try with a local hand-off.
#![allow(clippy::unwrap_used, clippy::panic)]

use super::*;

/// A waiter for a `u32` that needs `n`.
fn tag(n: u32) -> Option<Need> {
    Some(Need::permits(n))
}

fn tag_of(claim: &Claim) -> u32 {
    claim.need().count
}

const CH: &str = "ch";

#[test]
fn a_claim_takes_the_longest_waiting_free_tagged_waiter() {
    let hub = Hub::detached();
    let _untagged = hub.subscribe(CH, lock_message_policy, None);
    let first = hub.subscribe(CH, lock_message_policy, tag(1));
    let _second = hub.subscribe(CH, lock_message_policy, tag(2));
    assert!(hub.claim("other", Takes::Permits, MAX_HANDOFF_STREAK).is_none());
    // The first is trying: it cannot be claimed, the second is.
    let trying = first.begin_try().unwrap();
    let claim = hub.claim(CH, Takes::Permits, MAX_HANDOFF_STREAK).unwrap();
    assert_eq!(tag_of(&claim), 2);
    drop(trying);
    let claim1 = hub.claim(CH, Takes::Permits, MAX_HANDOFF_STREAK).unwrap();
    assert_eq!(tag_of(&claim1), 1);
    // Both claimed: nobody is left.
    assert!(hub.claim(CH, Takes::Permits, MAX_HANDOFF_STREAK).is_none());
    drop((claim, claim1));
}

#[tokio::test]
async fn a_claim_only_takes_waiters_for_what_it_hands_over() {
    let hub = Hub::detached();
    let for_hold = hub.subscribe(
        CH,
        lock_message_policy,
        Some(Need {
            takes: Takes::Hold,
            ..Need::permits(1)
        }),
    );
    let for_permits = hub.subscribe(CH, lock_message_policy, tag(5));
    // The longest-waiting waiter takes a hold: a releaser handing over permits passes it.
    let claim = hub.claim(CH, Takes::Permits, MAX_HANDOFF_STREAK).unwrap();
    assert_eq!(tag_of(&claim), 5);
    claim.deliver(test_grant(9)).unwrap();
    assert!(matches!(
        for_hold.wait(Duration::from_millis(1)).await,
        Woken::TimedOut
    ));
    match for_permits.wait(Duration::from_millis(1)).await {
        Woken::Handed(handoff) => assert_eq!(granted_count(handoff), 9),
        other => panic!("expected the hand-off, got {other:?}"),
    }
    // Served, it leaves: nobody else waits for permits, the waiter for a hold still can be
    // claimed, and a grant of permits is not delivered to it: it comes back, undone, and the
    // waiter is woken to try again.
    drop(for_permits);
    assert!(hub.claim(CH, Takes::Permits, MAX_HANDOFF_STREAK).is_none());
    let hold = hub.claim(CH, Takes::Hold, MAX_HANDOFF_STREAK).unwrap();
    let undone = Arc::new(AtomicUsize::new(0));
    drop(hold.deliver(counting_grant(undone.clone())).unwrap_err());
    assert_eq!(undone.load(Ordering::SeqCst), 1);
    assert!(for_hold.begin_try().is_ok());
    assert!(matches!(
        for_hold.wait(Duration::from_millis(1)).await,
        Woken::Notified
    ));
}

#[tokio::test]
async fn a_claimed_waiter_does_not_try_and_gets_the_hand_off() {
    let hub = Hub::detached();
    let waiter = hub.subscribe(CH, lock_message_policy, tag(1));
    let claim = hub.claim(CH, Takes::Permits, MAX_HANDOFF_STREAK).unwrap();
    // A retried acquire meeting the hand-off: the try must not run.
    assert!(matches!(waiter.begin_try(), Err(None)));
    claim.deliver(test_grant(7)).unwrap();
    match waiter.begin_try() {
        Err(Some(handoff)) => assert_eq!(granted_count(handoff), 7),
        other => panic!("expected the hand-off, got {other:?}"),
    }
    // Nothing is left for a later round, not even a spurious wake-up.
    assert!(matches!(
        waiter.wait(Duration::from_millis(1)).await,
        Woken::TimedOut
    ));
}

#[tokio::test]
async fn a_hand_off_to_a_waiter_that_left_comes_back_and_a_dropped_claim_wakes() {
    let hub = Hub::detached();
    let waiter = hub.subscribe(CH, lock_message_policy, tag(1));
    let claim = hub.claim(CH, Takes::Permits, MAX_HANDOFF_STREAK).unwrap();
    drop(waiter);
    let back = claim.deliver(test_grant(3)).unwrap_err();
    assert_eq!(granted_count(back), 3);

    let waiter = hub.subscribe(CH, lock_message_policy, tag(1));
    drop(hub.claim(CH, Takes::Permits, MAX_HANDOFF_STREAK).unwrap());
    assert!(matches!(
        waiter.wait(Duration::from_secs(5)).await,
        Woken::Notified
    ));
}

#[tokio::test]
async fn messages_wake_as_the_policy_says_and_skip_claimed_waiters() {
    let hub = Hub::detached();
    let a = hub.subscribe(CH, permits_message_policy, tag(1));
    let b = hub.subscribe(CH, permits_message_policy, tag(2));
    let c = hub.subscribe(CH, permits_message_policy, tag(3));
    let claim = hub.claim(CH, Takes::Permits, MAX_HANDOFF_STREAK).unwrap();
    assert_eq!(tag_of(&claim), 1);
    // Two permits released: the two unclaimed waiters wake, the claimed one does not.
    hub.shared.message(CH, b"2");
    let quick = Duration::from_millis(1);
    assert!(matches!(b.wait(quick).await, Woken::Notified));
    assert!(matches!(c.wait(quick).await, Woken::Notified));
    assert!(matches!(a.wait(quick).await, Woken::TimedOut));
    claim.deliver(test_grant(0)).unwrap();
    assert!(matches!(a.wait(quick).await, Woken::Handed(_)));
    // A wake-up is used once: no spurious second one.
    assert!(matches!(b.wait(quick).await, Woken::TimedOut));
    assert!(matches!(a.wait(quick).await, Woken::TimedOut));
    // A count of zero wakes nobody.
    let d = hub.subscribe(CH, permits_message_policy, tag(4));
    hub.shared.message(CH, b"0");
    assert!(matches!(d.wait(quick).await, Woken::TimedOut));
}

#[tokio::test]
async fn a_waiter_leaving_with_an_unused_wake_up_passes_it_on() {
    let hub = Hub::detached();
    let first = hub.subscribe(CH, lock_message_policy, None);
    let second = hub.subscribe(CH, lock_message_policy, None);
    hub.shared.message(CH, b"0");
    first.satisfied();
    drop(first);
    assert!(matches!(
        second.wait(Duration::from_secs(5)).await,
        Woken::Notified
    ));
}

#[test]
fn hand_offs_stop_at_the_streak_limit_until_a_public_message() {
    let hub = Hub::detached();
    let waiters: Vec<_> = (0..4)
        .map(|i| hub.subscribe(CH, lock_message_policy, tag(i)))
        .collect();
    for _ in 0..2 {
        hub.claim(CH, Takes::Permits, 2).unwrap().deliver(test_grant(0)).unwrap();
    }
    assert!(
        hub.claim(CH, Takes::Permits, 2).is_none(),
        "streak reached: release publicly"
    );
    assert!(hub.claim(CH, Takes::Permits, 2).is_some(), "the streak restarted");
    hub.shared.message(CH, b"1");
    drop(waiters);
    assert_eq!(hub.stats(), (0, 0));
}

/// Two tasks of one client taking a lock in turns: each hand-off serves the only waiter, whose
/// subscription then goes, leaving the channel without a local waiter until the other task
/// waits again. The streak goes on across those gaps (a streak started over at each would never
/// reach its limit, and the client would keep the lock from every other for good); a public
/// message seen while nobody waits ends it.
#[test]
fn the_streak_survives_the_channel_emptying_between_hand_offs() {
    let hub = Hub::detached();
    for served in 0..3 {
        let waiter = hub.subscribe(CH, lock_message_policy, tag(1));
        hub.claim(CH, Takes::Permits, 3).unwrap().deliver(test_grant(served)).unwrap();
        drop(waiter);
        assert_eq!(hub.stats(), (0, 0), "the channel is gone between hand-offs");
    }
    let waiter = hub.subscribe(CH, lock_message_policy, tag(1));
    assert!(
        hub.claim(CH, Takes::Permits, 3).is_none(),
        "the streak reached its limit across the gaps: release publicly"
    );
    drop(waiter);
    // Lingering (no waiter): a public release seen then ends a kept streak.
    let waiter = hub.subscribe(CH, lock_message_policy, tag(1));
    hub.claim(CH, Takes::Permits, 3).unwrap().deliver(test_grant(7)).unwrap();
    drop(waiter);
    hub.shared.message(CH, b"0");
    let _again = hub.subscribe(CH, lock_message_policy, tag(1));
    for _ in 0..3 {
        let next = hub.subscribe(CH, lock_message_policy, tag(1));
        hub.claim(CH, Takes::Permits, 3).unwrap().deliver(test_grant(0)).unwrap();
        drop(next);
    }
}

/// Ends a turn on `hub`'s channel: the streak is spent (a limit of 0), local waiters wait.
fn end_of_turn(hub: &Hub) {
    assert!(
        hub.claim_turn(CH, Takes::Permits, 0).is_none(),
        "the streak is spent"
    );
}

#[tokio::test]
async fn after_its_turn_a_client_lets_one_release_pass_per_other_subscriber() {
    let quick = Duration::from_millis(1);
    let hub = Hub::detached();
    let waiter = hub.subscribe(CH, lock_message_policy, tag(1));
    // The release's own message arrives before its reply: it is let pass, and the reply
    // (3 subscribers: this client and two others) lets one more pass.
    end_of_turn(&hub);
    hub.shared.message(CH, b"0");
    hub.end_turn(CH, 3);
    assert!(matches!(waiter.wait(quick).await, Woken::Deferred));
    hub.shared.message(CH, b"0");
    assert!(matches!(waiter.wait(quick).await, Woken::Deferred));
    hub.shared.message(CH, b"0");
    assert!(matches!(waiter.wait(quick).await, Woken::Notified));
    // The reply first: the same two pass.
    end_of_turn(&hub);
    hub.end_turn(CH, 3);
    for expected in ["deferred", "deferred", "notified"] {
        hub.shared.message(CH, b"0");
        let woken = waiter.wait(quick).await;
        match expected {
            "deferred" => assert!(matches!(woken, Woken::Deferred), "{woken:?}"),
            _ => assert!(matches!(woken, Woken::Notified), "{woken:?}"),
        }
    }
    // Another kind of message (a write lock's "1": everyone may enter) is never let pass.
    end_of_turn(&hub);
    hub.end_turn(CH, 3);
    hub.shared.message(CH, b"1");
    assert!(matches!(waiter.wait(quick).await, Woken::Notified));
}

#[tokio::test]
async fn a_turn_nobody_else_waits_for_goes_on_at_once() {
    let quick = Duration::from_millis(1);
    let hub = Hub::detached();
    let waiter = hub.subscribe(CH, lock_message_policy, tag(1));
    // Own message first, let pass; then the reply says nobody else is subscribed: the
    // deferred wake-up becomes a real one, whether or not the waiter has looked yet.
    end_of_turn(&hub);
    hub.shared.message(CH, b"0");
    hub.end_turn(CH, 1);
    assert!(matches!(waiter.wait(quick).await, Woken::Notified));
    end_of_turn(&hub);
    hub.shared.message(CH, b"0");
    assert!(matches!(waiter.wait(quick).await, Woken::Deferred));
    hub.end_turn(CH, 1);
    assert!(matches!(waiter.wait(quick).await, Woken::Notified));
    // The reply first: its own message wakes the waiter for real.
    end_of_turn(&hub);
    hub.end_turn(CH, 1);
    hub.shared.message(CH, b"0");
    assert!(matches!(waiter.wait(quick).await, Woken::Notified));
    // Published nothing, or answered from the latch (0): nothing is let pass.
    end_of_turn(&hub);
    hub.end_turn(CH, 0);
    hub.shared.message(CH, b"0");
    assert!(matches!(waiter.wait(quick).await, Woken::Notified));
}

#[tokio::test]
async fn only_a_turn_ending_release_lets_releases_pass() {
    let quick = Duration::from_millis(1);
    let hub = Hub::detached();
    let waiter = hub.subscribe(CH, lock_message_policy, tag(1));
    // A release that had local waiters to hand to and did not (no turn ended), and a
    // semaphore's claim at its streak limit: neither lets anything pass.
    hub.end_turn(CH, 5);
    hub.shared.message(CH, b"0");
    assert!(matches!(waiter.wait(quick).await, Woken::Notified));
    assert!(hub.claim(CH, Takes::Permits, 0).is_none());
    hub.end_turn(CH, 5);
    hub.shared.message(CH, b"0");
    assert!(matches!(waiter.wait(quick).await, Woken::Notified));
    // A reconnect forgets the turn: every waiter looks at once.
    end_of_turn(&hub);
    hub.end_turn(CH, 5);
    hub.shared.wake_everyone();
    assert!(matches!(waiter.wait(quick).await, Woken::Notified));
    hub.shared.message(CH, b"0");
    assert!(matches!(waiter.wait(quick).await, Woken::Notified));
}

/// The race the restart test found, run many times on real threads (shuttle explores its
/// schedules under the model checks).
#[test]
fn a_try_and_a_hand_off_never_both_happen() {
    for _ in 0..2_000 {
        super::races::try_vs_hand_off();
    }
}

/// An observer (a watcher of the object) is woken by every message, beside the waiters and
/// never in their place: a message that wakes one waiter still wakes it, the observer is
/// never claimed for a hand-off, and its leaving passes no wake-up on.
#[tokio::test]
async fn an_observer_is_woken_beside_the_waiters_and_never_in_their_place() {
    let quick = Duration::from_millis(1);
    let hub = Hub::detached();
    let observer = hub.observe(CH, lock_message_policy);
    let waiter = hub.subscribe(CH, lock_message_policy, tag(1));
    hub.shared.message(CH, b"0");
    assert!(matches!(waiter.wait(quick).await, Woken::Notified));
    assert!(matches!(observer.wait(quick).await, Woken::Notified));
    // Not claimed: the claim goes to the waiter.
    let claim = hub.claim(CH, Takes::Permits, MAX_HANDOFF_STREAK).unwrap();
    claim.deliver(test_grant(1)).unwrap();
    assert!(matches!(waiter.wait(quick).await, Woken::Handed(_)));
    assert!(!hub.has_waiters("other"));
    drop(waiter);
    assert!(!hub.has_waiters(CH), "an observer is no waiter");
    assert!(hub.claim(CH, Takes::Permits, MAX_HANDOFF_STREAK).is_none());
    // A waiter joining later is woken by a release, the observer too.
    let later = hub.subscribe(CH, lock_message_policy, tag(1));
    drop(observer);
    assert!(
        matches!(later.wait(quick).await, Woken::TimedOut),
        "the observer's leaving passed nothing on"
    );
    hub.shared.message(CH, b"0");
    assert!(matches!(later.wait(quick).await, Woken::Notified));
}

#[tokio::test]
async fn a_matching_message_wakes_only_the_waiters_that_want_what_it_names() {
    fn mask_policy(payload: &[u8]) -> Wake {
        Wake::Matching(std::str::from_utf8(payload).unwrap().parse().unwrap())
    }
    let hub = Hub::detached();
    let wants_a = hub.subscribe(CH, mask_policy, None);
    wants_a.set_interest(0b01);
    let wants_b = hub.subscribe(CH, mask_policy, None);
    wants_b.set_interest(0b10);
    let wants_any = hub.subscribe(CH, mask_policy, None);
    let quick = Duration::from_millis(1);
    hub.shared.message(CH, b"1");
    assert!(matches!(wants_a.wait(quick).await, Woken::Notified));
    assert!(matches!(wants_any.wait(quick).await, Woken::Notified));
    assert!(matches!(wants_b.wait(quick).await, Woken::TimedOut));
    // Every one that matches wakes, however many.
    hub.shared.message(CH, b"3");
    for waiter in [&wants_a, &wants_b, &wants_any] {
        assert!(matches!(waiter.wait(quick).await, Woken::Notified));
    }
}

#[tokio::test]
async fn a_waiter_let_pass_that_hears_the_lock_taken_sleeps_until_the_next_release() {
    let quick = Duration::from_millis(1);
    let hub = Hub::detached();
    let waiter = Arc::new(hub.subscribe(CH, lock_message_policy, tag(1)));
    // Another client took it before the waiter looked: its deferred wake-up is withdrawn.
    end_of_turn(&hub);
    hub.end_turn(CH, 3);
    hub.shared.message(CH, b"0");
    hub.shared.message(CH, TAKEN_MESSAGE);
    assert!(matches!(waiter.wait(quick).await, Woken::TimedOut));
    // Taken while it waits out its fallback: told so, before the fallback ends.
    hub.shared.message(CH, b"0");
    assert!(matches!(waiter.wait(quick).await, Woken::Deferred));
    let fallback = {
        let waiter = waiter.clone();
        tokio::spawn(async move { waiter.wait_fallback(Duration::from_secs(60)).await })
    };
    eventually_parked(&hub).await;
    hub.shared.message(CH, TAKEN_MESSAGE);
    let woken = tokio::time::timeout(Duration::from_secs(5), fallback)
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(woken, Woken::Taken), "{woken:?}");
    // The skips are spent: the next release wakes it for real.
    hub.shared.message(CH, b"0");
    assert!(matches!(waiter.wait(quick).await, Woken::Notified));
    // "Taken" alone never wakes a waiter that is not let a release pass.
    hub.shared.message(CH, TAKEN_MESSAGE);
    assert!(matches!(waiter.wait(quick).await, Woken::TimedOut));
}

#[tokio::test]
async fn a_release_right_after_the_lock_was_taken_is_not_lost() {
    let hub = Hub::detached();
    let waiter = Arc::new(hub.subscribe(CH, lock_message_policy, tag(1)));
    end_of_turn(&hub);
    hub.end_turn(CH, 2);
    hub.shared.message(CH, b"0");
    assert!(matches!(
        waiter.wait(Duration::from_millis(1)).await,
        Woken::Deferred
    ));
    let fallback = {
        let waiter = waiter.clone();
        tokio::spawn(async move { waiter.wait_fallback(Duration::from_secs(60)).await })
    };
    eventually_parked(&hub).await;
    // Taken, then released again, before the waiter looks: the release wakes it for real.
    hub.shared.message(CH, TAKEN_MESSAGE);
    hub.shared.message(CH, b"0");
    let woken = tokio::time::timeout(Duration::from_secs(5), fallback)
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(woken, Woken::Notified), "{woken:?}");
}

/// Waits until a waiter of `hub` sleeps in its wait.
async fn eventually_parked(hub: &Hub) {
    for _ in 0..5_000 {
        if hub.parked() > 0 {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("no waiter parked");
}
