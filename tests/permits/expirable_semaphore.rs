//! The permit-expirable semaphore against a real Redis.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use common::*;
use ferrisson::{AcquireOptions, Error, LossReason};
use ferrisson_expirable_semaphore::ExpirableSemaphore;
use redis::Commands;
use tokio::time::Instant;

const SOON: Duration = Duration::from_secs(10);

fn sem(client: &ferrisson::Client, name: &str) -> ExpirableSemaphore {
    ExpirableSemaphore::new(client, name).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_permits_bound_two_hundred_tasks_of_four_clients() {
    let redis = TestRedis::any();
    let name = unique_name("limit");
    let first = client(&redis.url()).await;
    assert!(sem(&first, &name).try_set_permits(20).await.unwrap());
    let in_flight = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let c = client(&redis.url()).await;
        for i in 0..50 {
            let s = sem(&c, &name);
            let (in_flight, most) = (in_flight.clone(), most.clone());
            tasks.push(tokio::spawn(async move {
                let options = match i % 2 {
                    0 => AcquireOptions::new().with_lease(Duration::from_secs(10)),
                    _ => AcquireOptions::new(),
                };
                let permit = s.acquire_with(options).await.unwrap();
                let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(2)).await;
                in_flight.fetch_sub(1, Ordering::SeqCst);
                permit.release().await.unwrap();
            }));
        }
    }
    join_within(SOON * 3, "all 200 tasks complete", tasks).await;
    let most = most.load(Ordering::SeqCst);
    assert!(most <= 20 && most > 1, "{most} in flight at once");
    let s = sem(&first, &name);
    assert_eq!(s.available_permits().await.unwrap(), 20);
    assert_eq!(s.acquired_permits().await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_clients_permits_come_back_within_one_lease_and_a_live_ones_stay() {
    let redis = TestRedis::any();
    let name = unique_name("dead-worker");
    let lease = Duration::from_millis(600);
    let live_client = client_with_lease(&redis.url(), lease).await;
    let s = sem(&live_client, &name);
    s.set_permits(4).await.unwrap();
    let kept = s.acquire().await.unwrap();

    // A worker process that takes two permits and then stops dead (its thread frozen).
    let (url, worker_name) = (redis.url(), name.clone());
    let (freeze_tx, freeze_rx) = std::sync::mpsc::channel::<()>();
    let (taken_tx, taken_rx) = std::sync::mpsc::channel::<()>();
    let worker = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let c = client_with_lease(&url, lease).await;
            let permits = sem(&c, &worker_name).acquire_many(2).await.unwrap();
            taken_tx.send(()).unwrap();
            let _ = freeze_rx.recv();
            std::mem::forget(permits);
        });
    });
    taken_rx.recv().unwrap();
    let frozen_at = Instant::now();
    assert_eq!(s.available_permits().await.unwrap(), 1);
    eventually(lease * 4, "the dead worker's permits come back", || async {
        s.available_permits().await.unwrap() == 3
    })
    .await;
    assert!(
        frozen_at.elapsed() >= lease / 2,
        "they came back too soon: {:?}",
        frozen_at.elapsed()
    );
    // The live holder's permit is renewed meanwhile.
    assert!(kept.ensure_held().is_ok());
    assert!(s.remaining_lease(kept.id()).await.unwrap().is_some());
    freeze_tx.send(()).unwrap();
    worker.join().unwrap();
    kept.release().await.unwrap();
    assert_eq!(s.available_permits().await.unwrap(), 4);
}

/// Permits that come back by expiring (the leases of a crashed holder run out): the waiter
/// that tried in vain wakes at the expiry its try was told, and the caller that queued behind
/// it without a try of its own gets the other permit (the try that returns expired permits to
/// the count publishes it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_left_after_a_try_wake_the_callers_queued_behind_it() {
    let redis = TestRedis::any();
    let name = unique_name("behind");
    let crashed = client(&redis.url()).await;
    let a = client(&redis.url()).await;
    let s = sem(&a, &name);
    s.set_permits(2).await.unwrap();
    // Taken by a client that then dies: fixed leases, never released.
    let gone = sem(&crashed, &name);
    for _ in 0..2 {
        gone.acquire_with(AcquireOptions::new().with_lease(Duration::from_millis(400)))
            .await
            .unwrap()
            .detach();
    }
    drop(crashed);
    let first = {
        let s = s.clone();
        tokio::spawn(async move { s.acquire().await.unwrap() })
    };
    eventually(SOON, "the first waiter waits", || async {
        a.waiter_stats().1 == 1
    })
    .await;
    let second = {
        let s = s.clone();
        tokio::spawn(async move { s.acquire().await.unwrap() })
    };
    eventually(SOON, "the second queues behind it", || async {
        a.waiter_stats().1 == 2
    })
    .await;
    let got = join_within(SOON, "both get a permit back", vec![first, second]).await;
    assert_eq!(s.acquired_permits().await.unwrap(), 2);
    for permit in got {
        permit.release().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_for_four_is_not_starved_by_single_permit_callers() {
    let redis = TestRedis::any();
    let name = unique_name("four");
    let a = client(&redis.url()).await;
    let b = client(&redis.url()).await;
    let s = sem(&a, &name);
    s.set_permits(4).await.unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let mut singles = Vec::new();
    for _ in 0..8 {
        let single = sem(&b, &name);
        let stop = stop.clone();
        singles.push(tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let permit = single.acquire().await.unwrap();
                tokio::time::sleep(Duration::from_millis(3)).await;
                permit.release().await.unwrap();
            }
        }));
    }
    eventually(SOON, "single-permit callers hold permits", || async {
        s.available_permits().await.unwrap() < 4
    })
    .await;
    let four = s
        .try_acquire_many_with(4, AcquireOptions::new().with_wait(SOON))
        .await
        .unwrap()
        .expect("the waiter for four gets them");
    assert_eq!(four.len(), 4);
    let ids: Vec<&str> = four.iter().map(|p| p.id()).collect();
    s.release_all(&ids).await.unwrap();
    drop(four);
    stop.store(true, Ordering::SeqCst);
    join_within(SOON, "single-permit callers stop", singles).await;
    eventually(SOON, "every permit back", || async {
        s.available_permits().await.unwrap() == 4
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_leases_and_counts_behave() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    let s = sem(&a, &unique_name("ids"));
    assert_eq!(s.available_permits().await.unwrap(), 0);
    assert!(s.try_acquire().await.unwrap().is_none());
    assert!(s.try_set_permits(3).await.unwrap());
    assert!(!s.try_set_permits(9).await.unwrap());

    let p1 = s
        .acquire_with(AcquireOptions::new().with_lease(Duration::from_secs(30)))
        .await
        .unwrap();
    let p2 = s
        .acquire_with(AcquireOptions::new().with_lease(Duration::from_millis(150)))
        .await
        .unwrap();
    assert_eq!(p1.id().len(), 32);
    assert_ne!(p1.id(), p2.id());
    assert_eq!(s.available_permits().await.unwrap(), 1);
    assert_eq!(s.acquired_permits().await.unwrap(), 2);
    assert_eq!(s.total_permits().await.unwrap(), 3);
    let left = s.remaining_lease(p1.id()).await.unwrap().unwrap();
    assert!(
        left > Duration::from_secs(25) && left <= Duration::from_secs(30),
        "{left:?}"
    );

    // The short lease runs out: the permit returns by itself, the guard says so, and the id
    // can neither be revived nor released.
    assert_eq!(
        tokio::time::timeout(SOON, p2.lost()).await.unwrap(),
        LossReason::LeaseExpired
    );
    let expired = p2.id().to_owned();
    // The guard says so at the latest moment the lease can end on the server (its send time
    // plus the lease): the server's own expiry comes a moment later.
    eventually(SOON, "the expired permit is back", || async {
        s.available_permits().await.unwrap() == 2
    })
    .await;
    assert!(
        !s.update_lease(&expired, Duration::from_secs(10))
            .await
            .unwrap()
    );
    assert!(s.remaining_lease(&expired).await.unwrap().is_none());
    let err = s.release(&expired).await.unwrap_err();
    assert!(matches!(err, Error::NotOwner(_)), "{err:?}");
    assert!(!s.try_release(&expired).await.unwrap());
    drop(p2);

    // All or nothing.
    let p3 = s.acquire().await.unwrap();
    let err = s
        .release_all(&[p1.id(), &expired, p3.id()])
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::NotOwner(m) if m.contains(&expired)),
        "{err:?}"
    );
    assert_eq!(
        s.acquired_permits().await.unwrap(),
        2,
        "nothing was released"
    );
    assert!(
        s.update_lease(p1.id(), Duration::from_secs(5))
            .await
            .unwrap()
    );
    assert!(s.remaining_lease(p1.id()).await.unwrap().unwrap() <= Duration::from_secs(5));
    s.release_all(&[p1.id(), p3.id()]).await.unwrap();
    assert_eq!(s.available_permits().await.unwrap(), 3);
    // Their guards know nothing of the explicit release: unlocking them now is an error.
    let err = p1.release().await.unwrap_err();
    assert!(matches!(err, Error::NotOwner(_)), "{err:?}");
    drop(p3);
    // A detached permit stays taken until released by id.
    let detached = s.acquire().await.unwrap().detach();
    assert_eq!(s.available_permits().await.unwrap(), 2);
    s.release(&detached).await.unwrap();
    assert_eq!(s.available_permits().await.unwrap(), 3);

    // Counts below zero and back.
    assert_eq!(s.add_permits(-5).await.unwrap(), -2);
    assert!(s.try_acquire().await.unwrap().is_none());
    assert_eq!(s.add_permits(3).await.unwrap(), 1);
    let p = s.try_acquire().await.unwrap().expect("one free");
    p.release().await.unwrap();
    assert_eq!(s.available_permits().await.unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_arguments_and_wrong_types_get_clear_errors() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    assert!(matches!(
        ExpirableSemaphore::new(&a, ""),
        Err(Error::InvalidArgument(_))
    ));
    let s = sem(&a, &unique_name("bad"));
    s.set_permits(2).await.unwrap();
    // Zero permits: at once, no ids, nothing taken (Redisson's `acquire(0)`).
    assert!(s.acquire_many(0).await.unwrap().is_empty());
    assert_eq!(
        s.try_acquire_many_with(0, AcquireOptions::new().with_wait(Duration::ZERO))
            .await
            .unwrap()
            .map(|p| p.len()),
        Some(0)
    );
    assert_eq!(s.available_permits().await.unwrap(), 2);
    assert!(matches!(
        s.acquire_with(AcquireOptions::new().with_lease(Duration::ZERO))
            .await,
        Err(Error::InvalidArgument(_))
    ));
    for id in ["", "xyz", "0123456789abcdef0123456789abcdeg"] {
        assert!(
            matches!(s.release(id).await, Err(Error::InvalidArgument(_))),
            "{id}"
        );
    }
    assert!(matches!(
        s.release_all(&[]).await,
        Err(Error::InvalidArgument(_))
    ));
    let unknown = "00112233445566778899aabbccddeeff";
    assert!(matches!(s.release(unknown).await, Err(Error::NotOwner(_))));
    assert_eq!(s.available_permits().await.unwrap(), 2, "nothing changed");

    let name = unique_name("text");
    let mut con = redis.connection();
    let _: () = con.set(&name, "not a count").unwrap();
    let s = sem(&a, &name);
    let err = s.try_acquire().await.unwrap_err();
    assert!(matches!(err, Error::WrongType { .. }), "{err:?}");
    let err = s.available_permits().await.unwrap_err();
    assert!(matches!(err, Error::WrongType { .. }), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_format_permits_interoperate() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    let mut con = redis.connection();
    let name = unique_name("redisson");
    let timeouts = format!("{{{name}}}:timeout");
    // Redisson: one permit free, one taken without lease (16 raw bytes, the "no lease" score).
    let id: [u8; 16] = *b"\x01\x23\x45\x67\x89\xab\xcd\xef\x01\x23\x45\x67\x89\xab\xcd\xef";
    let _: () = con.set(&name, 1).unwrap();
    let _: () = con
        .zadd(&timeouts, &id[..], 922_337_203_685_477_i64)
        .unwrap();
    let s = sem(&a, &name);
    assert_eq!(s.acquired_permits().await.unwrap(), 1);
    let hex = "0123456789abcdef0123456789abcdef";
    assert_eq!(s.remaining_lease(hex).await.unwrap(), Some(Duration::MAX));

    // Ours is stored the same way.
    let ours = s
        .acquire_with(AcquireOptions::new().with_lease(Duration::from_secs(30)))
        .await
        .unwrap();
    let raw = (0..16)
        .map(|i| u8::from_str_radix(&ours.id()[2 * i..2 * i + 2], 16).unwrap())
        .collect::<Vec<u8>>();
    let score: Option<f64> = con.zscore(&timeouts, &raw[..]).unwrap();
    assert!(score.is_some(), "our permit is a 16-byte member");

    // Redisson's permit released by its hex id, through ours.
    s.release(hex).await.unwrap();
    assert_eq!(s.available_permits().await.unwrap(), 1);
    ours.release().await.unwrap();
    assert_eq!(s.available_permits().await.unwrap(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permit_removed_behind_its_holders_back_is_reported_lost() {
    let redis = TestRedis::any();
    let name = unique_name("removed");
    let a = client_with_lease(&redis.url(), Duration::from_millis(600)).await;
    let s = sem(&a, &name);
    s.set_permits(1).await.unwrap();
    let permit = s.acquire().await.unwrap();
    let mut con = redis.connection();
    let _: () = con.del(format!("{{{name}}}:timeout")).unwrap();
    assert_eq!(
        tokio::time::timeout(SOON, permit.lost()).await.unwrap(),
        LossReason::NotHeld
    );
    assert!(permit.ensure_held().is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_calls_and_permits_leak_nothing() {
    let redis = TestRedis::any();
    let name = unique_name("dropped");
    let a = client(&redis.url()).await;
    let s = sem(&a, &name);
    s.set_permits(2).await.unwrap();
    for i in 0..40u64 {
        let held = if i % 2 == 0 {
            Some(s.acquire_many(2).await.unwrap())
        } else {
            None
        };
        let n = if i % 3 == 0 { 2 } else { 1 };
        let _ = tokio::time::timeout(Duration::from_micros(50 * i), s.acquire_many(n)).await;
        drop(held);
    }
    eventually(SOON, "both permits back", || async {
        s.available_permits().await.unwrap() == 2
    })
    .await;
    assert_eq!(s.acquired_permits().await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_released_permit_goes_to_a_local_waiter_under_a_new_id_without_a_message() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    let s = sem(&a, &unique_name("hand-off"));
    s.try_set_permits(1).await.unwrap();
    let held = s.acquire().await.unwrap();
    let held_id = held.id().to_owned();
    let waiting = s.clone();
    let waiter = tokio::spawn(async move {
        waiting
            .acquire_with(AcquireOptions::new().with_lease(Duration::from_secs(20)))
            .await
    });
    eventually(SOON, "the waiter waits", || async {
        a.waiter_stats().1 == 1
    })
    .await;
    let mut con = redis.connection();
    let before = settled_command_calls(&mut con).await;
    held.release().await.unwrap();
    let got = tokio::time::timeout(SOON, waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let after = settled_command_calls(&mut con).await;
    // One script call moves the permit (the first use of the release script is loaded
    // before it with `SCRIPT LOAD`, which runs nothing).
    assert_eq!(delta(&before, &after, "evalsha"), 1, "one script call");
    assert_eq!(
        delta(&before, &after, "incrby"),
        0,
        "the free count untouched"
    );
    assert_eq!(delta(&before, &after, "publish"), 0, "and no message");
    assert_ne!(got.id(), held_id, "every acquisition has an id of its own");
    assert_eq!(s.remaining_lease(&held_id).await.unwrap(), None);
    let lease = s.remaining_lease(got.id()).await.unwrap().unwrap();
    assert!(
        lease > Duration::from_secs(10) && lease <= Duration::from_secs(20),
        "the waiter's own lease: {lease:?}"
    );
    assert!(!got.is_lost());
    assert_eq!(
        (
            s.available_permits().await.unwrap(),
            s.acquired_permits().await.unwrap()
        ),
        (0, 1)
    );
    assert!(
        matches!(s.release(&held_id).await, Err(Error::NotOwner(_))),
        "the released id does not release the waiter's permit"
    );
    got.release().await.unwrap();
    assert_eq!(
        (
            s.available_permits().await.unwrap(),
            s.acquired_permits().await.unwrap()
        ),
        (1, 0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permit_handed_to_a_waiter_that_left_goes_back_to_the_pool() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    let s = sem(&a, &unique_name("hand-off-left"));
    s.try_set_permits(1).await.unwrap();
    // Many rounds: a waiter dropped at any point (before, during or after the hand-off) must
    // never keep the permit from the pool.
    for round in 0..20u64 {
        let held = s.acquire().await.unwrap();
        let waiting = s.clone();
        let waiter = tokio::spawn(async move { waiting.acquire().await });
        eventually(SOON, "the waiter waits", || async {
            a.waiter_stats().1 >= 1
        })
        .await;
        let release = tokio::spawn(held.release());
        // Abort the waiter somewhere around the hand-off: a few more yields each round.
        for _ in 0..round {
            tokio::task::yield_now().await;
        }
        waiter.abort();
        let _ = waiter.await;
        release.await.unwrap().unwrap();
        eventually(SOON, "the permit back in the pool", || async {
            s.available_permits().await.unwrap() == 1
        })
        .await;
    }
}

/// A permit taken with a fixed lease is extended as a lock's hold is (`HoldGuard::extend`):
/// on the server and in the guard; a watchdog-kept permit and a lost one refuse.
#[tokio::test]
async fn a_fixed_lease_permit_is_extended_and_a_lost_one_is_not() {
    let redis = TestRedis::any();
    let client = client(&redis.url()).await;
    let s = sem(&client, &unique_name("extend"));
    assert!(s.try_set_permits(2).await.unwrap());
    let permit = s
        .acquire_with(AcquireOptions::new().with_lease(Duration::from_secs(2)))
        .await
        .unwrap();
    permit.extend(Duration::from_secs(60)).await.unwrap();
    let left = s.remaining_lease(permit.id()).await.unwrap().unwrap();
    assert!(left > Duration::from_secs(50), "{left:?}");
    let deadline = permit.lease_deadline().unwrap();
    assert!(deadline > Instant::now() + Duration::from_secs(50));
    // Shorter works too: it is a new lease, not an addition.
    permit.extend(Duration::from_secs(5)).await.unwrap();
    let left = s.remaining_lease(permit.id()).await.unwrap().unwrap();
    assert!(left <= Duration::from_secs(5), "{left:?}");

    let kept = s.acquire().await.unwrap();
    assert!(matches!(
        kept.extend(Duration::from_secs(60)).await,
        Err(Error::InvalidArgument(_))
    ));

    // Released behind its back (by id): the extension finds it gone and the guard is lost.
    s.release(permit.id()).await.unwrap();
    assert!(matches!(
        permit.extend(Duration::from_secs(60)).await,
        Err(Error::LeaseLost(LossReason::NotHeld))
    ));
    assert!(permit.is_lost());
    assert!(matches!(
        permit.extend(Duration::from_secs(60)).await,
        Err(Error::LeaseLost(_))
    ));
    drop(kept);
}
