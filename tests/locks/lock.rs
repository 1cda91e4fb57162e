//! The reentrant lock against a real Redis.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common;

use ferrisson::{Lock, SyncObject};

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::*;
use ferrisson::{AcquireOptions, Error, LossReason, ReentrantLock};
use redis::Commands;
use tokio::time::Instant;

const SOON: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentrant_hold_counts_up_and_down() {
    let redis = TestRedis::any();
    let client = client(&redis.url()).await;
    // Re-entry is explicit: a handle bound to one owner.
    let lock = ReentrantLock::new(&client, &unique_name("reentrant"))
        .unwrap()
        .owned_by(client.new_owner());

    let first = lock.lock().await.unwrap();
    let second = lock.lock().await.unwrap();
    let third = lock
        .try_lock()
        .await
        .unwrap()
        .expect("the holder re-enters");
    assert_eq!(lock.hold_count().await.unwrap(), 3);
    assert!(lock.is_held_by_current().await.unwrap());

    third.unlock().await.unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 2);
    second.unlock().await.unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    assert!(lock.is_locked().await.unwrap());
    first.unlock().await.unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 0);
    assert!(!lock.is_locked().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_owner_cannot_take_a_held_lock() {
    let redis = TestRedis::any();
    let name = unique_name("exclusive");
    let a = client(&redis.url()).await;
    let b = client(&redis.url()).await;
    let lock_a = ReentrantLock::new(&a, &name).unwrap();
    let lock_b = ReentrantLock::new(&b, &name).unwrap();

    let guard = lock_a.lock().await.unwrap();
    assert!(lock_b.try_lock().await.unwrap().is_none(), "another client");
    let same_client_other_task = {
        let lock_a = lock_a.clone();
        tokio::spawn(async move { lock_a.try_lock().await.unwrap().is_none() })
    };
    assert!(
        same_client_other_task.await.unwrap(),
        "another task of the same client"
    );
    assert!(
        !lock_b
            .owned_by(b.new_owner())
            .is_held_by_current()
            .await
            .unwrap()
    );

    guard.unlock().await.unwrap();
    let guard_b = lock_b.try_lock().await.unwrap().expect("free after unlock");
    guard_b.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_lock_with_a_wait_gives_up_after_about_the_wait() {
    let redis = TestRedis::any();
    let name = unique_name("wait");
    let a = client(&redis.url()).await;
    let b = client(&redis.url()).await;
    let guard = ReentrantLock::new(&a, &name).unwrap().lock().await.unwrap();
    let lock_b = ReentrantLock::new(&b, &name).unwrap();

    let wait = Duration::from_millis(300);
    let started = Instant::now();
    let got = lock_b
        .try_lock_with(AcquireOptions::new().with_wait(wait))
        .await
        .unwrap();
    let waited = started.elapsed();
    assert!(got.is_none());
    assert!(waited >= wait, "gave up early: {waited:?}");
    assert!(
        waited < wait + Duration::from_secs(3),
        "gave up late: {waited:?}"
    );

    let err = lock_b
        .lock_with(AcquireOptions::new().with_wait(wait))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Timeout(w) if w == wait), "{err:?}");
    guard.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_gets_the_lock_when_it_is_released() {
    let redis = TestRedis::any();
    let name = unique_name("handoff");
    let a = client(&redis.url()).await;
    let b = client(&redis.url()).await;
    let guard = ReentrantLock::new(&a, &name).unwrap().lock().await.unwrap();
    let lock_b = ReentrantLock::new(&b, &name).unwrap();
    let waiter = tokio::spawn(async move {
        let guard = lock_b.lock().await.unwrap();
        guard.unlock().await.unwrap();
    });
    eventually(SOON, "the waiter subscribes", || async {
        b.waiter_stats() == (1, 1)
    })
    .await;
    guard.unlock().await.unwrap();
    // The lease is 30 s: getting in well before means the release message woke the waiter.
    tokio::time::timeout(SOON, waiter)
        .await
        .expect("woken by the release")
        .unwrap();
    eventually(SOON, "the subscription is dropped", || async {
        b.waiter_stats() == (0, 0)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_lease_expires_and_another_owner_gets_in() {
    let redis = TestRedis::any();
    let name = unique_name("lease");
    let a = client(&redis.url()).await;
    let b = client(&redis.url()).await;
    let lease = Duration::from_millis(400);
    let guard = ReentrantLock::new(&a, &name)
        .unwrap()
        .lock_with(AcquireOptions::new().with_lease(lease))
        .await
        .unwrap();
    let ttl = ReentrantLock::new(&a, &name)
        .unwrap()
        .remaining_ttl()
        .await
        .unwrap()
        .unwrap();
    assert!(ttl <= lease);

    let started = Instant::now();
    let guard_b = ReentrantLock::new(&b, &name).unwrap().lock().await.unwrap();
    assert!(started.elapsed() >= lease - Duration::from_millis(50));
    assert_eq!(guard.lost().await, LossReason::LeaseExpired);
    let err = guard.unlock().await.unwrap_err();
    assert!(
        matches!(err, Error::LeaseLost(LossReason::LeaseExpired)),
        "{err:?}"
    );
    assert!(
        ReentrantLock::new(&b, &name)
            .unwrap()
            .is_locked()
            .await
            .unwrap(),
        "b still holds it"
    );
    guard_b.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlock_by_a_non_owner_is_a_not_owner_error() {
    let redis = TestRedis::any();
    let name = unique_name("not-owner");
    let a = client(&redis.url()).await;
    let b = client(&redis.url()).await;
    let lock_a = ReentrantLock::new(&a, &name).unwrap();
    let guard = lock_a.lock().await.unwrap();
    // Someone force-unlocks, and another owner takes it before a's watchdog notices.
    assert!(
        ReentrantLock::new(&b, &name)
            .unwrap()
            .force_unlock()
            .await
            .unwrap()
    );
    let guard_b = ReentrantLock::new(&b, &name).unwrap().lock().await.unwrap();

    let err = guard.unlock().await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::NotOwner(_) | Error::LeaseLost(LossReason::NotHeld)
        ),
        "{err:?}"
    );
    assert!(lock_a.is_locked().await.unwrap(), "b's hold is untouched");
    guard_b.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlock_of_a_hold_that_redis_no_longer_has_is_not_owner() {
    let redis = TestRedis::any();
    let name = unique_name("not-owner-direct");
    let a = client(&redis.url()).await;
    let guard = ReentrantLock::new(&a, &name).unwrap().lock().await.unwrap();
    let mut con = redis.connection();
    let _: () = con.del(&name).unwrap();
    // The watchdog renews every 10 s: the loss is not known locally yet.
    let err = guard.unlock().await.unwrap_err();
    assert!(matches!(err, Error::NotOwner(_)), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_frees_the_lock_and_wakes_a_waiter() {
    let redis = TestRedis::any();
    let name = unique_name("force");
    let a = client(&redis.url()).await;
    let b = client(&redis.url()).await;
    let lock_a = ReentrantLock::new(&a, &name).unwrap();
    assert!(!lock_a.force_unlock().await.unwrap(), "nothing to force");
    let guard = lock_a.lock().await.unwrap();
    let lock_b = ReentrantLock::new(&b, &name).unwrap();
    let waiter = tokio::spawn(async move { lock_b.lock().await.unwrap().unlock().await.unwrap() });
    eventually(SOON, "the waiter subscribes", || async {
        b.waiter_stats().1 == 1
    })
    .await;
    assert!(
        ReentrantLock::new(&b, &name)
            .unwrap()
            .force_unlock()
            .await
            .unwrap()
    );
    tokio::time::timeout(SOON, waiter)
        .await
        .expect("woken")
        .unwrap();
    assert!(guard.unlock().await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_keeps_a_lock_held_for_several_leases() {
    let redis = TestRedis::any();
    let name = unique_name("watchdog");
    let lease = Duration::from_millis(600);
    let a = client_with_lease(&redis.url(), lease).await;
    let lock = ReentrantLock::new(&a, &name)
        .unwrap()
        .owned_by(a.new_owner());
    let guard = lock.lock().await.unwrap();
    let renewals_before = a.renewal_calls();
    let held_until = Instant::now() + lease * 4;
    while Instant::now() < held_until {
        assert!(
            lock.is_held_by_current().await.unwrap(),
            "lost while the watchdog runs"
        );
        assert!(!guard.is_lost());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        a.renewal_calls() >= renewals_before + 6,
        "renewed every third of the lease"
    );
    let ttl = lock.remaining_ttl().await.unwrap().unwrap();
    assert!(ttl <= lease && ttl > Duration::ZERO);
    guard.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
}

#[test]
fn a_holder_whose_client_is_gone_frees_the_lock_within_one_lease() {
    let redis = TestRedis::any();
    let url = redis.url();
    let name = unique_name("crash");
    let lease = Duration::from_millis(800);
    // The holder's runtime is dropped with the guard forgotten: no unlock, no watchdog.
    std::thread::scope(|s| {
        s.spawn(|| {
            let runtime = tokio::runtime::Runtime::new().unwrap();
            runtime.block_on(async {
                let client = client_with_lease(&url, lease).await;
                let guard = ReentrantLock::new(&client, &name)
                    .unwrap()
                    .lock()
                    .await
                    .unwrap();
                std::mem::forget(guard);
            });
        });
    });
    let gone_at = std::time::Instant::now();
    let mut con = redis.connection();
    assert!(
        con.exists::<_, bool>(&name).unwrap(),
        "still held right after the crash"
    );
    while con.exists::<_, bool>(&name).unwrap() {
        assert!(
            gone_at.elapsed() < lease + Duration::from_secs(2),
            "not freed within one lease"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_loss_signal_fires_when_the_key_is_deleted_behind_the_holders_back() {
    let redis = TestRedis::any();
    let name = unique_name("deleted");
    let lease = Duration::from_millis(600);
    let a = client_with_lease(&redis.url(), lease).await;
    let guard = ReentrantLock::new(&a, &name).unwrap().lock().await.unwrap();
    assert!(guard.ensure_held().is_ok());
    let mut con = redis.connection();
    let _: () = con.del(&name).unwrap();
    let reason = tokio::time::timeout(lease * 2, guard.lost())
        .await
        .expect("signalled within a lease");
    assert_eq!(reason, LossReason::NotHeld);
    assert!(matches!(
        guard.ensure_held(),
        Err(Error::LeaseLost(LossReason::NotHeld))
    ));
    assert!(matches!(guard.unlock().await, Err(Error::LeaseLost(_))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_loss_signal_fires_when_redis_restarts() {
    let mut server = RedisServer::spawn();
    let name = unique_name("restart-loss");
    let lease = Duration::from_millis(600);
    let a = client_with_lease(&server.url(), lease).await;
    let guard = ReentrantLock::new(&a, &name).unwrap().lock().await.unwrap();
    server.restart();
    let reason = tokio::time::timeout(lease * 3, guard.lost())
        .await
        .expect("signalled");
    assert!(
        matches!(reason, LossReason::NotHeld | LossReason::RenewalFailed),
        "{reason:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_loss_signal_fires_before_the_lease_ends_when_redis_is_unreachable() {
    let server = RedisServer::spawn();
    let name = unique_name("down-loss");
    let lease = Duration::from_millis(900);
    let a = client_with_lease(&server.url(), lease).await;
    let guard = ReentrantLock::new(&a, &name).unwrap().lock().await.unwrap();
    let deadline = guard.lease_deadline().unwrap();
    server.pause();
    let reason = tokio::time::timeout(lease * 3, guard.lost())
        .await
        .expect("signalled");
    let signalled_at = Instant::now();
    server.resume();
    assert_eq!(reason, LossReason::RenewalFailed);
    // The deadline only moves forward with renewals that were answered, none here after the
    // pause: so the signal came no later than the last known deadline (plus scheduling).
    let latest = guard_deadline_or(deadline, &guard);
    assert!(
        signalled_at <= latest + Duration::from_millis(250),
        "late by {:?}",
        signalled_at - latest
    );
}

fn guard_deadline_or(fallback: Instant, guard: &ferrisson::HoldGuard) -> Instant {
    guard.lease_deadline().unwrap_or(fallback).max(fallback)
}

#[test]
fn a_stalled_runtime_marks_the_hold_lost() {
    let redis = TestRedis::any();
    let name = unique_name("stall");
    let lease = Duration::from_millis(500);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let a = client_with_lease(&redis.url(), lease).await;
        let guard = ReentrantLock::new(&a, &name).unwrap().lock().await.unwrap();
        // Block the only runtime thread past the lease: the watchdog cannot run.
        std::thread::sleep(lease * 2);
        // Checked before the watchdog had any chance to run: the deadline alone tells.
        assert_eq!(guard.loss_reason(), Some(LossReason::Stalled));
        assert!(matches!(
            guard.ensure_held(),
            Err(Error::LeaseLost(LossReason::Stalled))
        ));
        let reason = tokio::time::timeout(lease, guard.lost())
            .await
            .expect("signalled");
        assert_eq!(reason, LossReason::Stalled);
        drop(guard);
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_tokens_strictly_increase_across_owners() {
    let redis = TestRedis::any();
    let name = unique_name("fenced");
    let clients = [client(&redis.url()).await, client(&redis.url()).await];
    let mut last = 0;
    for round in 0..6 {
        let client = &clients[round % 2];
        let lock = ReentrantLock::fenced(client, &name)
            .unwrap()
            .owned_by(client.new_owner());
        let guard = lock.lock().await.unwrap();
        let token = guard.token().unwrap();
        assert!(token > last, "{token} after {last}");
        let inner = lock.lock().await.unwrap();
        assert!(
            inner.token().unwrap() > token,
            "re-entry gets a new token too"
        );
        last = inner.token().unwrap();
        inner.unlock().await.unwrap();
        guard.unlock().await.unwrap();
    }
    let plain = ReentrantLock::new(&clients[0], &name)
        .unwrap()
        .lock()
        .await
        .unwrap();
    assert_eq!(plain.token(), None);
    plain.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_plain_counter_under_the_lock_loses_no_update() {
    const CLIENTS: usize = 4;
    const TASKS: usize = 16;
    const ROUNDS: u64 = 5;
    let redis = TestRedis::any();
    let name = unique_name("counter");
    let counter_key = format!("{name}:counter");
    let mut tasks = Vec::new();
    for _ in 0..CLIENTS {
        let client = client(&redis.url()).await;
        for _ in 0..TASKS {
            let lock = ReentrantLock::new(&client, &name).unwrap();
            let counter = redis::Client::open(redis.url()).unwrap();
            let counter_key = counter_key.clone();
            tasks.push(tokio::spawn(async move {
                let mut con = counter.get_multiplexed_async_connection().await.unwrap();
                for _ in 0..ROUNDS {
                    let guard = lock.lock().await.unwrap();
                    // Read, then write: not atomic, so only the lock keeps updates apart.
                    let n: u64 = redis::cmd("GET")
                        .arg(&counter_key)
                        .query_async::<Option<u64>>(&mut con)
                        .await
                        .unwrap()
                        .unwrap_or(0);
                    tokio::task::yield_now().await;
                    let _: () = redis::cmd("SET")
                        .arg(&counter_key)
                        .arg(n + 1)
                        .query_async(&mut con)
                        .await
                        .unwrap();
                    guard.unlock().await.unwrap();
                }
            }));
        }
    }
    join_within(Duration::from_secs(60), "no task hangs", tasks).await;
    let mut con = redis.connection();
    let total: u64 = con.get(&counter_key).unwrap();
    assert_eq!(total, (CLIENTS * TASKS) as u64 * ROUNDS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_survive_a_redis_restart() {
    let mut server = RedisServer::spawn();
    let name = unique_name("restart-wait");
    let a = client(&server.url()).await;
    let b = client(&server.url()).await;
    let guard = ReentrantLock::new(&a, &name).unwrap().lock().await.unwrap();
    let done = Arc::new(AtomicU64::new(0));
    let mut waiters = Vec::new();
    for _ in 0..4 {
        let lock = ReentrantLock::new(&b, &name).unwrap();
        let done = done.clone();
        waiters.push(tokio::spawn(async move {
            let guard = lock.lock().await.unwrap();
            done.fetch_add(1, Ordering::SeqCst);
            guard.unlock().await.unwrap();
        }));
    }
    eventually(SOON, "all four wait", || async { b.waiter_stats().1 == 4 }).await;
    server.restart();
    // The lock vanished with the restart: the waiters get in without the holder's release.
    join_within(Duration::from_secs(20), "nobody hangs", waiters).await;
    assert_eq!(done.load(Ordering::SeqCst), 4);
    assert!(
        guard.unlock().await.is_err(),
        "the old holder lost its hold"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_lock_future_leaks_nothing() {
    let redis = TestRedis::any();
    let name = unique_name("cancel");
    let a = client(&redis.url()).await;
    let b = client(&redis.url()).await;
    let lock_b = ReentrantLock::new(&b, &name).unwrap();

    // Dropped while waiting: no subscription, no queue entry remains.
    let guard = ReentrantLock::new(&a, &name).unwrap().lock().await.unwrap();
    assert!(
        tokio::time::timeout(Duration::from_millis(100), lock_b.lock())
            .await
            .is_err()
    );
    eventually(SOON, "the waiter leaves", || async {
        b.waiter_stats() == (0, 0)
    })
    .await;
    guard.unlock().await.unwrap();

    // Dropped at every point of an uncontended acquire, script in flight included: a hold
    // taken by an abandoned attempt is released at once, not after the 30 s lease.
    for micros in (0..2_000).step_by(50) {
        let _ = tokio::time::timeout(Duration::from_micros(micros), lock_b.lock()).await;
        let lock = lock_b.clone();
        eventually(SOON, "an abandoned acquisition is released", move || {
            let lock = lock.clone();
            async move { !lock.is_locked().await.unwrap() }
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_subscriber_connection_serves_a_thousand_waiters() {
    const WAITERS: usize = 1_000;
    let redis = TestRedis::Spawned(RedisServer::spawn());
    let a = client(&redis.url()).await;
    // Default settings: its waits go on record once they last.
    let b = ferrisson::Client::connect(&redis.url()).await.unwrap();
    let names: Vec<String> = (0..4).map(|i| unique_name(&format!("many-{i}"))).collect();
    let mut guards = Vec::new();
    for name in &names {
        guards.push(ReentrantLock::new(&a, name).unwrap().lock().await.unwrap());
    }
    let acquired = Arc::new(AtomicU64::new(0));
    let mut waiters = Vec::new();
    for i in 0..WAITERS {
        let lock = ReentrantLock::new(&b, &names[i % names.len()]).unwrap();
        let acquired = acquired.clone();
        waiters.push(tokio::spawn(async move {
            let guard = lock.lock().await.unwrap();
            acquired.fetch_add(1, Ordering::SeqCst);
            guard.unlock().await.unwrap();
        }));
    }
    eventually(SOON, "all waiters wait", || async {
        b.waiter_stats() == (names.len(), WAITERS)
    })
    .await;
    let mut con = redis.connection();
    // a's client has no waiters, so its subscriber connection holds no subscription.
    assert_eq!(subscriber_connections(&mut con), 1);

    // Nothing changes, so Redis hears nothing from a thousand waiters (once each has made the
    // try that follows its subscription, and their client has written their waits, which
    // lasted, into its record: one call for them all).
    eventually(SOON, "the waits on record", || {
        let n = recorded_waits(&mut con, &b).len();
        async move { n == WAITERS }
    })
    .await;
    let before = settled_command_calls(&mut con).await;
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let after = command_calls(&mut con);
    assert_eq!(
        total_calls(&after),
        total_calls(&before),
        "idle waiters send commands"
    );

    for guard in guards {
        guard.unlock().await.unwrap();
    }
    join_within(Duration::from_secs(60), "every waiter gets in", waiters).await;
    assert_eq!(acquired.load(Ordering::SeqCst), WAITERS as u64);
    eventually(SOON, "all channels unsubscribed", || async {
        b.waiter_stats() == (0, 0)
    })
    .await;
    let mut con = redis.connection();
    eventually(SOON, "no subscription left", || {
        let n = subscriber_connections(&mut con);
        async move { n == 0 }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_wakes_exactly_one_local_waiter() {
    let redis = TestRedis::Spawned(RedisServer::spawn());
    let name = unique_name("wake-one");
    let a = client(&redis.url()).await;
    let b = client(&redis.url()).await;
    // Load the scripts, so that no NOSCRIPT round shows in the counts below.
    let warm_up = ReentrantLock::new(&a, &unique_name("warm-up")).unwrap();
    warm_up.lock().await.unwrap().unlock().await.unwrap();
    let guard = ReentrantLock::new(&a, &name).unwrap().lock().await.unwrap();
    let mut waiters = Vec::new();
    for _ in 0..10 {
        let lock = ReentrantLock::new(&b, &name).unwrap();
        waiters.push(tokio::spawn(async move {
            let guard = lock.lock().await.unwrap();
            tokio::time::sleep(Duration::from_secs(3600)).await;
            drop(guard);
        }));
    }
    eventually(SOON, "ten waiters", || async { b.waiter_stats().1 == 10 }).await;
    let mut con = redis.connection();
    let before = settled_command_calls(&mut con).await;
    guard.unlock().await.unwrap();
    eventually(SOON, "one waiter gets in", || async {
        b.waiter_stats().1 == 9
    })
    .await;
    // An observation window for stray wake-ups: each would show as one more script call.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = command_calls(&mut con);
    assert_eq!(
        delta(&before, &after, "evalsha"),
        2,
        "the unlock and the one woken waiter's try"
    );
    assert_eq!(delta(&before, &after, "script|load"), 0);
    for waiter in waiters {
        waiter.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncontended_lock_and_unlock_cost_two_script_calls() {
    let redis = TestRedis::Spawned(RedisServer::spawn());
    let a = client(&redis.url()).await;
    let lock = ReentrantLock::new(&a, &unique_name("two-calls")).unwrap();
    // Warm up: the first calls load the scripts (NOSCRIPT, SCRIPT LOAD).
    lock.lock().await.unwrap().unlock().await.unwrap();
    let mut con = redis.connection();
    let before = command_calls(&mut con);
    lock.lock().await.unwrap().unlock().await.unwrap();
    let after = command_calls(&mut con);
    assert_eq!(delta(&before, &after, "evalsha"), 2);
    // (Commands a script runs count too: only ones that no script runs are checked here.)
    for command in ["eval", "script|load", "subscribe", "unsubscribe", "ping"] {
        assert_eq!(delta(&before, &after, command), 0, "{command}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_clear_error() {
    let mut server = RedisServer::spawn();
    let a = client(&server.url()).await;

    let err = ReentrantLock::new(&a, "").unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    assert!(err.to_string().contains("empty"));

    let lock = ReentrantLock::new(&a, &unique_name("bad")).unwrap();
    let err = lock
        .lock_with(AcquireOptions::new().with_lease(Duration::ZERO))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    assert!(!lock.is_locked().await.unwrap(), "nothing was sent");

    let string_key = unique_name("a-string");
    let mut con = server.connection();
    let _: () = con.set(&string_key, "not a lock").unwrap();
    let lock = ReentrantLock::new(&a, &string_key)
        .unwrap()
        .owned_by(a.new_owner());
    for err in [
        lock.try_lock().await.unwrap_err(),
        lock.force_unlock().await.unwrap_err(),
        lock.hold_count().await.unwrap_err(),
    ] {
        assert!(
            matches!(&err, Error::WrongType { key } if *key == string_key),
            "{err:?}"
        );
    }
    let value: String = con.get(&string_key).unwrap();
    assert_eq!(value, "not a lock", "the foreign key is untouched");

    server.stop();
    let err = ReentrantLock::new(&a, "down")
        .unwrap()
        .try_lock()
        .await
        .unwrap_err();
    assert!(err.is_connection_error(), "{err:?}");
    let err = ferrisson::Client::connect(&server.url()).await.unwrap_err();
    assert!(
        matches!(&err, Error::Unreachable { address, .. } if *address == server.url()),
        "{err:?}"
    );
    let err = ferrisson::Client::connect("not a url").await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redisson_holder_excludes_ours_and_its_release_wakes_ours() {
    let redis = TestRedis::any();
    let name = unique_name("redisson");
    let mut con = redis.connection();
    // What Redisson's RLock.lock() writes: hash field "<uuid>:<thread id>" → hold count.
    let _: () = con
        .hset(&name, "6c6d4bcb-7e0b-4d0e-9f6b-0f6b5d6a0c1e:57", 1)
        .unwrap();
    let _: () = con.pexpire(&name, 60_000).unwrap();

    let a = client(&redis.url()).await;
    let lock = ReentrantLock::new(&a, &name).unwrap();
    assert!(
        lock.try_lock().await.unwrap().is_none(),
        "the Redisson hold excludes ours"
    );
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.lock().await.unwrap() })
    };
    eventually(SOON, "ours waits", || async { a.waiter_stats().1 == 1 }).await;
    // What Redisson's unlock does when the count reaches zero: delete, publish 0.
    let _: () = con.del(&name).unwrap();
    let _: () = con
        .publish(format!("redisson_lock__channel:{{{name}}}"), 0)
        .unwrap();
    let guard = tokio::time::timeout(SOON, waiter)
        .await
        .expect("woken well before the 60 s TTL")
        .unwrap();
    let fields: std::collections::HashMap<String, u32> = con.hgetall(&name).unwrap();
    assert_eq!(
        fields.get(guard.owner().as_str()),
        Some(&1),
        "Redisson reads our hold the same way"
    );
    guard.unlock().await.unwrap();
}

#[test]
fn bounds() {
    fn send_sync<T: Send + Sync + 'static>() {}
    send_sync::<ReentrantLock>();
    send_sync::<ferrisson::HoldGuard>();
    send_sync::<ferrisson::Client>();
    send_sync::<ferrisson::Owner>();
    send_sync::<Error>();
}

/// Compiled, never run: every future the lock hands out can move between threads.
#[allow(dead_code)]
fn futures_are_send(lock: &ReentrantLock, guard: ferrisson::HoldGuard) {
    fn send<T: Send>(_: T) {}
    send(lock.lock());
    send(lock.lock_with(AcquireOptions::new()));
    send(lock.try_lock());
    send(lock.try_lock_with(AcquireOptions::new()));
    send(lock.force_unlock());
    send(lock.is_locked());
    send(lock.hold_count());
    send(lock.remaining_ttl());
    send(guard.lost());
    send(guard.unlock());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explicit_owner_moves_a_hold_between_tasks() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    let name = unique_name("explicit-owner");
    let owner = a.new_owner();
    let lock = ReentrantLock::new(&a, &name)
        .unwrap()
        .owned_by(owner.clone());
    let guard = lock.lock().await.unwrap();
    assert_eq!(guard.owner(), &owner);
    // Another task without the owner handle is another owner: it must wait.
    let plain = ReentrantLock::new(&a, &name).unwrap();
    assert!(
        tokio::spawn(async move { plain.try_lock().await.unwrap().is_none() })
            .await
            .unwrap()
    );
    // With the handle, it re-enters, and can release the first task's hold.
    let moved = lock.clone();
    tokio::spawn(async move {
        let inner = moved.lock().await.unwrap();
        assert_eq!(moved.hold_count().await.unwrap(), 2);
        inner.unlock().await.unwrap();
        guard.unlock().await.unwrap();
    })
    .await
    .unwrap();
    assert!(!lock.is_locked().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_hands_the_lock_to_a_local_waiter_in_one_script_call() {
    let redis = TestRedis::Spawned(RedisServer::spawn());
    let a = client(&redis.url()).await;
    let name = unique_name("handoff-local");
    let warm_up = ReentrantLock::new(&a, &unique_name("warm-up")).unwrap();
    warm_up.lock().await.unwrap().unlock().await.unwrap();
    let guard = ReentrantLock::new(&a, &name).unwrap().lock().await.unwrap();
    let mut waiters = Vec::new();
    for _ in 0..5 {
        let lock = ReentrantLock::new(&a, &name).unwrap();
        waiters.push(tokio::spawn(async move {
            let guard = lock.lock().await.unwrap();
            let owner = guard.owner().clone();
            tokio::time::sleep(Duration::from_secs(3600)).await;
            drop((guard, owner));
        }));
    }
    let mut con = redis.connection();
    let before = parked_then_settled(&a, 5, &mut con).await;
    guard.unlock().await.unwrap();
    eventually(SOON, "one waiter holds it", || async {
        a.waiter_stats().1 == 4
    })
    .await;
    let after = settled_command_calls(&mut con).await;
    assert_eq!(delta(&before, &after, "evalsha"), 1, "the release alone");
    assert_eq!(
        delta(&before, &after, "publish"),
        0,
        "nobody else needed waking"
    );
    let fields: std::collections::HashMap<String, u32> = con.hgetall(&name).unwrap();
    assert_eq!(fields.len(), 1, "one holder: {fields:?}");
    for waiter in waiters {
        waiter.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn local_hand_offs_do_not_starve_other_clients() {
    let redis = TestRedis::any();
    let name = unique_name("handoff-fair");
    let busy = client(&redis.url()).await;
    let other = client(&redis.url()).await;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut hammering = Vec::new();
    for _ in 0..8 {
        let lock = ReentrantLock::new(&busy, &name).unwrap();
        let stop = stop.clone();
        hammering.push(tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let guard = lock.lock().await.unwrap();
                tokio::time::sleep(Duration::from_millis(1)).await;
                guard.unlock().await.unwrap();
            }
        }));
    }
    eventually(SOON, "the busy client queues up", || async {
        busy.waiter_stats().1 >= 4
    })
    .await;
    // The busy client always has a local waiter to hand to; the other client still gets in.
    let lock = ReentrantLock::new(&other, &name).unwrap();
    for _ in 0..3 {
        let guard = tokio::time::timeout(SOON, lock.lock())
            .await
            .expect("not starved by hand-offs")
            .unwrap();
        guard.unlock().await.unwrap();
    }
    stop.store(true, Ordering::SeqCst);
    join_within(SOON, "the busy tasks stop", hammering).await;
}

/// Clients take turns: four clients with four tasks each hammer one lock with no hold time.
/// Without turns, the client whose woken waiter reaches Redis first after each public release
/// (its subscriber connection is served first) wins nearly every race and then keeps the lock
/// for a streak of local hand-offs: a run of the bench saw 12,627 acquisitions for one client
/// and 107 for another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_take_turns_with_a_contended_lock() {
    const CLIENTS: usize = 4;
    const TASKS: usize = 4;
    const TOTAL: u64 = 1_200;
    let redis = TestRedis::any();
    let name = unique_name("turns");
    let total = Arc::new(AtomicU64::new(0));
    let counts: Vec<Arc<AtomicU64>> = (0..CLIENTS).map(|_| Arc::default()).collect();
    let mut clients = Vec::new();
    let mut tasks = Vec::new();
    for count in &counts {
        let c = client(&redis.url()).await;
        for _ in 0..TASKS {
            let lock = ReentrantLock::new(&c, &name).unwrap();
            let (count, total) = (count.clone(), total.clone());
            tasks.push(tokio::spawn(async move {
                while total.load(Ordering::SeqCst) < TOTAL {
                    let guard = lock.lock().await.unwrap();
                    count.fetch_add(1, Ordering::SeqCst);
                    total.fetch_add(1, Ordering::SeqCst);
                    guard.unlock().await.unwrap();
                }
            }));
        }
        clients.push(c);
    }
    join_within(Duration::from_secs(60), "the tasks finish", tasks).await;
    let counts: Vec<u64> = counts.iter().map(|c| c.load(Ordering::SeqCst)).collect();
    let fewest = *counts.iter().min().unwrap();
    let most = *counts.iter().max().unwrap();
    // An equal share is 300; allow a wide margin (start-up, the last turns), far from 107
    // against 12,627.
    assert!(
        most <= 4 * fewest.max(1),
        "one client's share dwarfs another's: {counts:?}"
    );
}

/// A client that lets releases pass after its turn still gets the lock when the client whose
/// turn it is has nobody waiting any more (its subscription lingers, so the release message
/// still counts it): its waiter tries once the short fallback has passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_left_to_a_client_with_no_waiters_comes_back() {
    let redis = TestRedis::any();
    let name = unique_name("turn-fallback");
    let busy = client(&redis.url()).await;
    let gone = client(&redis.url()).await;
    // The other client waits once, then leaves: its subscription lingers for a while.
    let held = ReentrantLock::new(&busy, &name)
        .unwrap()
        .lock()
        .await
        .unwrap();
    let waiting = {
        let lock = ReentrantLock::new(&gone, &name).unwrap();
        tokio::spawn(async move { lock.lock().await.unwrap().unlock().await.unwrap() })
    };
    eventually(SOON, "the other client waits", || async {
        gone.waiter_stats().1 == 1
    })
    .await;
    held.unlock().await.unwrap();
    join_within(SOON, "the other client gets in and leaves", vec![waiting]).await;
    // The busy client's tasks run through many turns; each turn's end counts the other
    // client's lingering subscription, and nobody there takes the lock.
    let done = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let lock = ReentrantLock::new(&busy, &name).unwrap();
        let done = done.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..40 {
                lock.lock().await.unwrap().unlock().await.unwrap();
                done.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    join_within(SOON, "the busy client goes on through its turns", tasks).await;
    assert_eq!(done.load(Ordering::SeqCst), 160);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hand_offs_keep_fencing_tokens_increasing() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    let name = unique_name("handoff-fenced");
    let guard = ReentrantLock::fenced(&a, &name)
        .unwrap()
        .lock()
        .await
        .unwrap();
    let first = guard.token().unwrap();
    let tokens = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for _ in 0..6 {
        let lock = ReentrantLock::fenced(&a, &name).unwrap();
        let tokens = tokens.clone();
        waiters.push(tokio::spawn(async move {
            let guard = lock.lock().await.unwrap();
            tokens.lock().unwrap().push(guard.token().unwrap());
            guard.unlock().await.unwrap();
        }));
    }
    eventually(SOON, "six waiters", || async { a.waiter_stats().1 == 6 }).await;
    guard.unlock().await.unwrap();
    join_within(SOON, "every waiter gets in", waiters).await;
    let tokens = tokens.lock().unwrap().clone();
    assert_eq!(tokens.len(), 6);
    let mut last = first;
    for token in tokens {
        assert!(token > last, "{token} after {last}");
        last = token;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_cancelled_around_a_hand_off_leak_nothing() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    let name = unique_name("handoff-cancel");
    let lock = ReentrantLock::new(&a, &name).unwrap();
    for round in 0..40u64 {
        let guard = lock.lock().await.unwrap();
        let waiters: Vec<_> = (0..3)
            .map(|i| {
                let lock = lock.clone();
                tokio::spawn(async move {
                    // Cancelled at scattered moments around the release below.
                    let cancel_after = Duration::from_micros(200 * (round % 7) + 150 * i);
                    let wait = cancel_after + Duration::from_millis(2);
                    if let Ok(guard) = tokio::time::timeout(wait, lock.lock()).await {
                        guard.unwrap().unlock().await.unwrap();
                    }
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(1)).await;
        guard.unlock().await.unwrap();
        join_within(SOON, "the waiters finish", waiters).await;
        let lock = lock.clone();
        eventually(SOON, "nothing is left held", move || {
            let lock = lock.clone();
            async move { !lock.is_locked().await.unwrap() }
        })
        .await;
    }
    eventually(SOON, "no waiter is left registered", || async {
        a.waiter_stats() == (0, 0)
    })
    .await;
}

/// A client whose calls time out after 100 ms and are retried, for lost-reply tests.
async fn impatient_client(url: &str) -> ferrisson::Client {
    let retry = ferrisson::RetryPolicy {
        retries: 10,
        backoff: ferrisson::Backoff {
            min: Duration::from_millis(50),
            max: Duration::from_millis(200),
        },
    };
    ferrisson::Client::with_config(
        ferrisson::ClientConfig::new(url)
            .with_response_timeout(Duration::from_millis(100))
            .with_retry(retry),
    )
    .await
    .unwrap()
}

/// Freezes the server for a while in the background: calls sent meanwhile time out, are
/// retried, and Redis runs the first attempt and its retries once it thaws.
fn freeze_for(server: &RedisServer, pause: Duration) -> std::thread::JoinHandle<()> {
    server.freeze_for(pause)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_retried_after_a_lost_reply_counts_once() {
    let server = RedisServer::spawn();
    let a = impatient_client(&server.url()).await;
    let lock = ReentrantLock::new(&a, &unique_name("lost-acquire"))
        .unwrap()
        .owned_by(a.new_owner());
    lock.lock().await.unwrap().unlock().await.unwrap();

    let thaw = freeze_for(&server, Duration::from_millis(350));
    let guard = lock.lock().await.unwrap();
    thaw.join().unwrap();
    assert_eq!(
        lock.hold_count().await.unwrap(),
        1,
        "the retries did not count again"
    );
    guard.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlock_retried_after_a_lost_reply_releases_once() {
    let server = RedisServer::spawn();
    let a = impatient_client(&server.url()).await;
    let lock = ReentrantLock::new(&a, &unique_name("lost-unlock"))
        .unwrap()
        .owned_by(a.new_owner());
    let outer = lock.lock().await.unwrap();
    let inner = lock.lock().await.unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 2);

    let thaw = freeze_for(&server, Duration::from_millis(350));
    inner.unlock().await.unwrap();
    thaw.join().unwrap();
    assert_eq!(
        lock.hold_count().await.unwrap(),
        1,
        "the retries did not release again"
    );
    outer.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
}

/// The last hold's release whose reply is lost: the retry finds the lock already freed by the
/// lost call, and the unlock reports success from the call's latch, never `NotOwner`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_last_unlock_retried_after_a_lost_reply_reports_success() {
    let server = RedisServer::spawn();
    let a = impatient_client(&server.url()).await;
    let lock = ReentrantLock::new(&a, &unique_name("lost-last-unlock")).unwrap();
    // Warm up: the scripts are loaded before the server freezes.
    lock.lock().await.unwrap().unlock().await.unwrap();
    for round in 0..3 {
        let guard = lock.lock().await.unwrap();
        let thaw = freeze_for(&server, Duration::from_millis(350));
        guard
            .unlock()
            .await
            .unwrap_or_else(|e| panic!("round {round}: the retried unlock failed: {e}"));
        thaw.join().unwrap();
        assert!(!lock.is_locked().await.unwrap(), "round {round}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_lock_always_hands_out_a_growing_token() {
    let redis = TestRedis::any();
    let name = unique_name("fenced-type");
    let a = client(&redis.url()).await;
    let b = client(&redis.url()).await;
    let on_a = ferrisson::FencedLock::new(&a, &name).unwrap();
    let on_b = ferrisson::FencedLock::new(&b, &name).unwrap();
    let first = on_a.lock().await.unwrap();
    assert!(on_b.try_lock().await.unwrap().is_none());
    // Re-entry through the guard's owner gets a token of its own, and a larger one.
    let again = on_a.owned_by(first.owner().clone()).lock().await.unwrap();
    assert!(again.token() > first.token());
    let last = again.token();
    again.unlock().await.unwrap();
    first.unlock().await.unwrap();
    let second = on_b.lock().await.unwrap();
    assert!(second.token() > last, "across clients too");
    assert!(!second.is_lost());
    second.into_inner().unlock().await.unwrap();
    assert!(!on_a.as_lock().is_locked().await.unwrap());
}

/// `prefixed`'s rule, as the test states it: `p:{name}`, or `p:name` for a name with a tag.
fn redisson_key(prefix: &str, name: &str) -> String {
    if name.contains('{') {
        format!("{prefix}:{name}")
    } else {
        format!("{prefix}:{{{name}}}")
    }
}

/// The values of the one record of a client on the lock `name` (`suffixed(name,
/// "record"):<client id>`, a hash of slot → `<seq>:<code>:<token>`).
fn record_values(con: &mut redis::Connection, name: &str) -> Vec<String> {
    let record = if name.contains('{') {
        format!("{name}:record:*")
    } else {
        format!("{{{name}}}:record:*")
    };
    let records: Vec<String> = con.keys(record).unwrap();
    assert_eq!(records.len(), 1, "{name}: one record: {records:?}");
    let ttl: i64 = con.pttl(&records[0]).unwrap();
    assert!(ttl > 0, "{name}: the record has a TTL ({ttl})");
    con.hvals(&records[0]).unwrap()
}

/// The release script derives the release channel and the fencing counter from the keys it is
/// given (fewer arguments per call): they must be Redisson's names, for names with and without
/// a hash tag. What it did goes to the client's one record on the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_uses_redissons_channel_and_counter_names() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    let mut con = redis.connection();
    for name in [
        unique_name("derived"),
        format!("orders{{{}}}:eu", unique_name("derived")),
    ] {
        // The release message, on Redisson's channel.
        let mut sub = redis.connection();
        sub.set_read_timeout(Some(SOON)).unwrap();
        let mut pubsub = sub.as_pubsub();
        pubsub
            .subscribe(redisson_key("redisson_lock__channel", &name))
            .unwrap();
        let lock = ReentrantLock::new(&a, &name)
            .unwrap()
            .owned_by(a.new_owner());
        let outer = lock.lock().await.unwrap();
        // A release that leaves a hold records it in the client's record.
        lock.lock().await.unwrap().unlock().await.unwrap();
        let recorded = record_values(&mut con, &name);
        assert_eq!(recorded.len(), 1, "{name}: {recorded:?}");
        assert!(
            recorded[0].ends_with(":0:0"),
            "{name}: holds remain: {recorded:?}"
        );
        outer.unlock().await.unwrap();
        let message = pubsub.get_message().unwrap();
        assert_eq!(message.get_payload::<String>().unwrap(), "0", "{name}");
        drop(pubsub);

        // A fenced hand-off issues its token from Redisson's counter.
        let fenced = ReentrantLock::fenced(&a, &name).unwrap();
        let holder = fenced.lock().await.unwrap();
        let waiter = {
            let fenced = fenced.clone();
            tokio::spawn(async move { fenced.lock().await.unwrap() })
        };
        // Parked: asleep until a release, so the release can hand it the lock.
        eventually(SOON, "one waiter parked", || async {
            a.parked_waiters() == 1
        })
        .await;
        holder.unlock().await.unwrap();
        let next = tokio::time::timeout(SOON, waiter).await.unwrap().unwrap();
        let counter: u64 = con.get(redisson_key("redisson_lock_token", &name)).unwrap();
        assert_eq!(next.token(), Some(counter), "{name}");
        // It was a hand-off: its record names that token.
        let values = record_values(&mut con, &name);
        assert!(
            values.iter().any(|v| v.ends_with(&format!(":2:{counter}"))),
            "{name}: {values:?}"
        );
        next.unlock().await.unwrap();
    }
}

/// A read-write lock's hash at the name (with an expiry and owners, as a held lock has, but a
/// `mode` field) is no reentrant lock: a clear error, never a wait, nothing written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_write_locks_hash_at_the_name_is_a_wrong_type() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    let mut con = redis.connection();
    let name = unique_name("rw-at-name");
    let _: () = con.hset(&name, "mode", "write").unwrap();
    let _: () = con
        .hset(&name, "6c6d4bcb-7e0b-4d0e-9f6b-0f6b5d6a0c1e:57:write", 1)
        .unwrap();
    let _: () = con.pexpire(&name, 60_000).unwrap();
    let lock = ReentrantLock::new(&a, &name).unwrap();
    for err in [
        lock.try_lock().await.unwrap_err(),
        lock.lock().await.unwrap_err(),
    ] {
        assert!(matches!(err, Error::WrongType { .. }), "{err:?}");
    }
    let fields: std::collections::HashMap<String, String> = con.hgetall(&name).unwrap();
    assert_eq!(fields.len(), 2, "untouched: {fields:?}");
}

/// `unlock` of a hold lost before returns `LeaseLost` whatever Redis said, an error included:
/// a watchdog-kept hold lost to failed renewals and a fixed lease run out, both unlocked with
/// Redis down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlock_after_a_loss_is_lease_lost_even_with_redis_down() {
    let mut server = RedisServer::spawn();
    let a = client_with_lease(&server.url(), Duration::from_millis(600)).await;
    let name = unique_name("lost-then-down");
    let lock = ReentrantLock::new(&a, &name).unwrap();
    let kept = lock.lock().await.unwrap();
    let fixed = ReentrantLock::new(&a, &format!("{name}:fixed"))
        .unwrap()
        .lock_with(AcquireOptions::new().with_lease(Duration::from_millis(100)))
        .await
        .unwrap();
    server.stop();
    let lost = tokio::time::timeout(Duration::from_secs(5), kept.lost())
        .await
        .expect("renewals failing end the hold");
    assert_eq!(lost, LossReason::RenewalFailed);
    assert_eq!(fixed.loss_reason(), Some(LossReason::LeaseExpired));
    for (guard, reason) in [
        (kept, LossReason::RenewalFailed),
        (fixed, LossReason::LeaseExpired),
    ] {
        let err = guard.unlock().await.unwrap_err();
        assert!(
            matches!(err, Error::LeaseLost(r) if r == reason),
            "an unlock after a loss, Redis down: {err:?}"
        );
    }
}
