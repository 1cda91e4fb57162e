//! The semaphore against a real Redis.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use common::*;
use ferrisson::AcquireOptions;
use ferrisson::Error;
use ferrisson_semaphore::{Permits, Semaphore};
use redis::Commands;

const SOON: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_permits_bound_two_hundred_tasks_of_four_clients() {
    let redis = TestRedis::any();
    let name = unique_name("limit");
    let in_flight = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    let first = client(&redis.url()).await;
    assert!(
        Semaphore::new(&first, &name)
            .unwrap()
            .try_set_permits(20)
            .await
            .unwrap()
    );
    for _ in 0..4 {
        let c = client(&redis.url()).await;
        for _ in 0..50 {
            let semaphore = Semaphore::new(&c, &name).unwrap();
            let (in_flight, most) = (in_flight.clone(), most.clone());
            tasks.push(tokio::spawn(async move {
                let permit = semaphore.acquire().await.unwrap();
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
    assert!(most <= 20, "{most} in flight at once");
    assert!(most > 1, "the tasks did overlap ({most})");
    let semaphore = Semaphore::new(&first, &name).unwrap();
    assert_eq!(semaphore.available_permits().await.unwrap(), 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_for_four_is_not_starved_by_single_permit_callers() {
    let redis = TestRedis::any();
    let name = unique_name("four");
    let a = client(&redis.url()).await;
    let b = client(&redis.url()).await;
    let semaphore = Semaphore::new(&a, &name).unwrap();
    semaphore.set_permits(4).await.unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let mut singles = Vec::new();
    for _ in 0..8 {
        let s = Semaphore::new(&b, &name).unwrap();
        let stop = stop.clone();
        singles.push(tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let permit = s.acquire().await.unwrap();
                tokio::time::sleep(Duration::from_millis(3)).await;
                permit.release().await.unwrap();
            }
        }));
    }
    eventually(SOON, "single-permit callers hold permits", || async {
        semaphore.available_permits().await.unwrap() < 4
    })
    .await;
    for _ in 0..3 {
        let four = semaphore
            .try_acquire_many_with(4, AcquireOptions::new().with_wait(SOON))
            .await
            .unwrap()
            .expect("the waiter for four gets them");
        four.release().await.unwrap();
    }
    stop.store(true, Ordering::SeqCst);
    join_within(SOON, "single-permit callers stop", singles).await;
    assert_eq!(semaphore.available_permits().await.unwrap(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_stay_exact_across_every_operation() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    let s = Semaphore::new(&a, &unique_name("counts")).unwrap();
    assert_eq!(s.available_permits().await.unwrap(), 0);
    assert_eq!(s.drain_permits().await.unwrap(), 0);
    assert!(s.try_acquire_many(1).await.unwrap().is_none());
    assert!(s.try_set_permits(10).await.unwrap());
    assert!(!s.try_set_permits(3).await.unwrap());
    s.acquire_many(3).await.unwrap().forget();
    assert_eq!(s.available_permits().await.unwrap(), 7);
    assert_eq!(s.drain_permits().await.unwrap(), 7);
    assert_eq!(s.available_permits().await.unwrap(), 0);
    // Reduce below zero: callers wait until enough come back.
    assert_eq!(s.add_permits(-5).await.unwrap(), -5);
    assert!(s.try_acquire_many(1).await.unwrap().is_none());
    assert_eq!(s.drain_permits().await.unwrap(), 0);
    assert_eq!(s.available_permits().await.unwrap(), -5);
    s.release(10).await.unwrap();
    assert_eq!(s.available_permits().await.unwrap(), 5);
    assert!(
        s.try_acquire_many(5)
            .await
            .unwrap()
            .map(Permits::forget)
            .is_some()
    );
    assert_eq!(s.available_permits().await.unwrap(), 0);
    assert_eq!(s.add_permits(0).await.unwrap(), 0);
    s.release(2).await.unwrap();
    s.set_permits(1).await.unwrap();
    assert_eq!(s.available_permits().await.unwrap(), 1);
    // A waiter is woken by a release.
    let waiting = s.clone();
    let waiter = tokio::spawn(async move {
        waiting
            .try_acquire_many_with(3, AcquireOptions::new().with_wait(SOON))
            .await
            .unwrap()
            .map(Permits::forget)
            .is_some()
    });
    eventually(SOON, "the waiter waits", || async {
        a.waiter_stats().1 == 1
    })
    .await;
    s.release(2).await.unwrap();
    assert!(tokio::time::timeout(SOON, waiter).await.unwrap().unwrap());
    assert_eq!(s.available_permits().await.unwrap(), 0);
    // Out of time: false, and nothing taken.
    assert!(
        s.try_acquire_many_with(
            1,
            AcquireOptions::new().with_wait(Duration::from_millis(100))
        )
        .await
        .unwrap()
        .is_none()
    );
    assert_eq!(s.available_permits().await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_permits_and_wrong_types_get_clear_errors() {
    // A server of its own: the test counts the commands it receives.
    let redis = RedisServer::spawn();
    let a = client(&redis.url()).await;
    assert!(matches!(
        Semaphore::new(&a, ""),
        Err(Error::InvalidArgument(_))
    ));
    // Zero permits are a no-op that succeeds at once, even with none free (Redisson's and
    // tokio's meaning), and changes nothing.
    let s = Semaphore::new(&a, &unique_name("zero")).unwrap();
    s.set_permits(0).await.unwrap();
    let before = command_calls(&mut redis.connection());
    let zero = s.acquire_many(0).await.unwrap();
    assert_eq!(zero.count(), 0);
    zero.release().await.unwrap();
    s.release(0).await.unwrap();
    assert_eq!(
        s.try_acquire_many(0).await.unwrap().map(|p| p.count()),
        Some(0)
    );
    assert_eq!(
        s.try_acquire_many_with(0, AcquireOptions::new().with_wait(SOON))
            .await
            .unwrap()
            .map(|p| p.count()),
        Some(0)
    );
    drop(s.acquire_many(0).await.unwrap());
    let after = command_calls(&mut redis.connection());
    assert_eq!(
        delta(&before, &after, "evalsha") + delta(&before, &after, "eval"),
        0,
        "zero permits send nothing"
    );
    assert_eq!(s.available_permits().await.unwrap(), 0, "nothing changed");

    let mut con = redis.connection();
    let hash = unique_name("hash");
    let _: () = con.hset(&hash, "f", 1).unwrap();
    let text = unique_name("text");
    let _: () = con.set(&text, "not a count").unwrap();
    for name in [&hash, &text] {
        let s = Semaphore::new(&a, name).unwrap();
        let err = s.try_acquire().await.unwrap_err();
        assert!(matches!(err, Error::WrongType { .. }), "{name}: {err:?}");
        let err = s.release(1).await.unwrap_err();
        assert!(matches!(err, Error::WrongType { .. }), "{name}: {err:?}");
        let err = s.add_permits(1).await.unwrap_err();
        assert!(matches!(err, Error::WrongType { .. }), "{name}: {err:?}");
        let err = s.available_permits().await.unwrap_err();
        assert!(matches!(err, Error::WrongType { .. }), "{name}: {err:?}");
    }
    let kept: String = con.get(&text).unwrap();
    assert_eq!(kept, "not a count");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_format_state_interoperates() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    let mut con = redis.connection();
    let name = unique_name("redisson");
    // Redisson's trySetPermits(3): the count as a plain string.
    let _: () = con.set(&name, 3).unwrap();
    let s = Semaphore::new(&a, &name).unwrap();
    assert_eq!(s.available_permits().await.unwrap(), 3);
    assert!(
        s.try_acquire_many(3)
            .await
            .unwrap()
            .map(Permits::forget)
            .is_some()
    );
    let raw: i64 = con.get(&name).unwrap();
    assert_eq!(raw, 0);

    let waiting = s.clone();
    let waiter = tokio::spawn(async move { waiting.acquire_many(2).await.unwrap().forget() });
    eventually(SOON, "the waiter waits", || async {
        a.waiter_stats().1 == 1
    })
    .await;
    // Redisson's release(2): INCRBY, then publish the new count on redisson_sc:{name}.
    let count: i64 = con.incr(&name, 2).unwrap();
    let _: () = con
        .publish(format!("redisson_sc:{{{name}}}"), count)
        .unwrap();
    tokio::time::timeout(SOON, waiter).await.unwrap().unwrap();
    assert_eq!(s.available_permits().await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_calls_and_permits_leak_nothing() {
    let redis = TestRedis::any();
    let name = unique_name("dropped");
    let a = client(&redis.url()).await;
    let s = Semaphore::new(&a, &name).unwrap();
    s.set_permits(2).await.unwrap();
    // Dropped at every stage: before, during and after the acquire call, with permits free
    // and with all of them taken.
    for i in 0..40u64 {
        let held = if i % 2 == 0 {
            Some(s.acquire_many(2).await.unwrap())
        } else {
            None
        };
        let n = if i % 3 == 0 { 2 } else { 1 };
        let _ = tokio::time::timeout(Duration::from_micros(50 * i), s.acquire_many(n)).await;
        if let Some(held) = held {
            held.release().await.unwrap();
        }
    }
    eventually(SOON, "both permits back", || async {
        s.available_permits().await.unwrap() == 2
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_hands_permits_to_a_local_waiter_without_a_round_trip() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    let s = Semaphore::new(&a, &unique_name("hand-off")).unwrap();
    s.set_permits(1).await.unwrap();
    let held = s.acquire().await.unwrap();
    let waiting = s.clone();
    let waiter = tokio::spawn(async move { waiting.acquire().await.unwrap() });
    let mut con = redis.connection();
    let before = parked_then_settled(&a, 1, &mut con).await;
    held.release().await.unwrap();
    let got = tokio::time::timeout(SOON, waiter).await.unwrap().unwrap();
    let after = settled_command_calls(&mut con).await;
    assert_eq!(
        delta(&before, &after, "evalsha"),
        0,
        "the permit moved without a script call"
    );
    assert_eq!(
        s.available_permits().await.unwrap(),
        0,
        "still taken, by the waiter"
    );
    got.release().await.unwrap();
    assert_eq!(s.available_permits().await.unwrap(), 1);
}

/// A call that queued behind a waiter without a try of its own is woken when that waiter's
/// try takes a permit and sees more left. Here the release of two permits reached the client
/// before the second call queued: its message woke only the first waiter, so nothing else
/// would wake the second before its lease-long re-check (30 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_left_after_a_try_wake_the_calls_queued_behind_it() {
    let server = RedisServer::spawn();
    let proxy = ferrisson_testkit::FaultProxy::start(server.port());
    let direct = client(&server.url()).await;
    let slow = client(&proxy.url()).await;
    let name = unique_name("behind");
    let s = Semaphore::new(&slow, &name).unwrap();
    Semaphore::new(&direct, &name)
        .unwrap()
        .set_permits(0)
        .await
        .unwrap();
    let first = {
        let s = s.clone();
        tokio::spawn(async move { s.acquire().await.unwrap() })
    };
    eventually(SOON, "the first call waits", || async {
        slow.waiter_stats().1 == 1
    })
    .await;
    let mut con = server.connection();
    let before = settled_command_calls(&mut con).await;
    // Replies to the slow client now take a second; the message of two permits reaches it,
    // wakes the first call, whose try reaches Redis and takes one, its reply on the way.
    proxy.delay_replies(Duration::from_secs(1));
    Semaphore::new(&direct, &name)
        .unwrap()
        .add_permits(2)
        .await
        .unwrap();
    let con = std::sync::Mutex::new(con);
    eventually(SOON, "the first call's try reached Redis", || {
        let calls = command_calls(&mut con.lock().unwrap());
        let reached = delta(&before, &calls, "evalsha") >= 2;
        async move { reached }
    })
    .await;
    // Within that second: it queues behind the first, whose try was in vain last time.
    let second = {
        let s = s.clone();
        tokio::spawn(async move { s.acquire().await.unwrap() })
    };
    let got = join_within(SOON, "both calls get a permit", vec![first, second]).await;
    proxy.delay_replies(Duration::ZERO);
    assert_eq!(got.iter().map(|p| p.count()).sum::<u32>(), 2);
    for permits in got {
        permits.release().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_joining_local_waiters_queues_behind_them_without_a_try() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    let s = Semaphore::new(&a, &unique_name("join")).unwrap();
    s.set_permits(1).await.unwrap();
    let held = s.acquire().await.unwrap();
    let first = {
        let s = s.clone();
        tokio::spawn(async move { s.acquire().await.unwrap() })
    };
    eventually(SOON, "the first waiter waits", || async {
        a.waiter_stats().1 == 1
    })
    .await;
    let mut con = redis.connection();
    let before = settled_command_calls(&mut con).await;
    let second = {
        let s = s.clone();
        tokio::spawn(async move { s.acquire().await.unwrap() })
    };
    eventually(SOON, "the second waiter waits", || async {
        a.waiter_stats().1 == 2
    })
    .await;
    let after = settled_command_calls(&mut con).await;
    // The first waiter's try found no permit: the second, which wants no more, would fail
    // too, and queues behind it without a try.
    assert_eq!(
        delta(&before, &after, "evalsha"),
        0,
        "no try: it queued behind the first"
    );
    // A call for more permits cannot tell from that: it tries once, then sleeps.
    let before = settled_command_calls(&mut con).await;
    let many = {
        let s = s.clone();
        tokio::spawn(async move { s.acquire_many(2).await.unwrap() })
    };
    eventually(SOON, "the call for two waits", || async {
        a.waiter_stats().1 == 3
    })
    .await;
    let after = settled_command_calls(&mut con).await;
    assert_eq!(
        delta(&before, &after, "evalsha"),
        1,
        "one try, then it sleeps"
    );
    many.abort();
    // Served in the order they came: the first, then the second.
    held.release().await.unwrap();
    let got = tokio::time::timeout(SOON, first).await.unwrap().unwrap();
    assert!(
        !second.is_finished(),
        "the second waits for the first's permit"
    );
    got.release().await.unwrap();
    let got = tokio::time::timeout(SOON, second).await.unwrap().unwrap();
    got.release().await.unwrap();
    eventually(SOON, "the permit is back", || async {
        s.available_permits().await.unwrap() == 1
    })
    .await;
}
