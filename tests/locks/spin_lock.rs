//! The spin lock against a real Redis: exclusion across clients and tasks without any pub/sub,
//! re-entry through an owner, waits bounded by their deadline, backoff settings, the
//! watchdog's renewals and loss signal, fencing, and Redisson's `RSpinLock` layout.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::*;
use ferrisson::{AcquireOptions, Error, Lock, LossReason};
use ferrisson_spin_lock::{Backoff, SpinLock};
use redis::Commands;

const SOON: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_of_several_clients_exclude_each_other_without_pub_sub() {
    let redis = TestRedis::any();
    let mut con = redis.connection();
    let clients = [client(&redis.url()).await, client(&redis.url()).await];
    let name = unique_name("spin");
    let inside = Arc::new(AtomicUsize::new(0));
    let before = command_calls(&mut con);
    let mut tasks = Vec::new();
    for i in 0..8 {
        let lock = SpinLock::new(&clients[i % 2], &name).unwrap();
        let inside = inside.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..5 {
                let guard = lock.lock().await.unwrap();
                assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                tokio::time::sleep(Duration::from_millis(2)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                guard.unlock().await.unwrap();
            }
        }));
    }
    join_within(Duration::from_secs(60), "every task gets its turns", tasks).await;
    let after = command_calls(&mut con);
    for command in ["subscribe", "ssubscribe", "publish", "spublish"] {
        assert_eq!(
            delta(&before, &after, command),
            0,
            "a spin lock never uses {command}"
        );
    }
    for client in &clients {
        assert_eq!(client.waiter_stats(), (0, 0));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waits_end_at_their_deadline_and_reentry_goes_through_an_owner() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    let name = unique_name("spin-wait");
    let lock = SpinLock::new(&a, &name).unwrap();
    let guard = lock.lock().await.unwrap();
    assert!(lock.try_lock().await.unwrap().is_none());
    let started = tokio::time::Instant::now();
    let got = lock
        .try_lock_with(AcquireOptions::new().with_wait(Duration::from_millis(300)))
        .await
        .unwrap();
    assert!(got.is_none());
    assert!(started.elapsed() >= Duration::from_millis(300));
    let mine = lock.owned_by(guard.owner().clone());
    let again = mine.lock().await.unwrap();
    assert_eq!(mine.hold_count().await.unwrap(), 2);
    again.unlock().await.unwrap();
    // A waiter polls its way in once the holder lets go.
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.lock().await.unwrap() })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    guard.unlock().await.unwrap();
    let second = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the waiter got in within its backoff")
        .unwrap();
    second.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
    // A fixed lease shorter than the wait: the waiter gets in when it runs out.
    let short = lock
        .lock_with(AcquireOptions::new().with_lease(Duration::from_millis(200)))
        .await
        .unwrap();
    let next = lock
        .try_lock_with(AcquireOptions::new().with_wait(Duration::from_secs(5)))
        .await
        .unwrap()
        .expect("free once the lease ran out");
    assert!(short.is_lost());
    next.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backoffs_are_checked_and_the_watchdog_keeps_and_reports_holds() {
    let redis = TestRedis::any();
    let a = client_with_lease(&redis.url(), Duration::from_millis(600)).await;
    let name = unique_name("spin-watchdog");
    let lock = SpinLock::fenced(&a, &name).unwrap();
    for bad in [
        Backoff {
            min: Duration::ZERO,
            max: Duration::from_millis(10),
        },
        Backoff {
            min: Duration::from_millis(20),
            max: Duration::from_millis(10),
        },
        Backoff {
            min: Duration::from_millis(1),
            max: Duration::MAX,
        },
    ] {
        assert!(matches!(
            lock.with_backoff(bad),
            Err(Error::InvalidArgument(_))
        ));
    }
    let slow = lock
        .with_backoff(Backoff {
            min: Duration::from_millis(5),
            max: Duration::from_millis(20),
        })
        .unwrap();
    assert_eq!(slow.backoff().max, Duration::from_millis(20));
    let guard = slow.lock().await.unwrap();
    let token = guard.token().unwrap();
    // Kept past several leases by the watchdog.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(guard.ensure_held().is_ok());
    assert!(slow.is_locked().await.unwrap());
    // Deleted behind its back: the next renewal reports it.
    let _: () = redis.connection().del(&name).unwrap();
    let reason = tokio::time::timeout(Duration::from_secs(5), guard.lost())
        .await
        .unwrap();
    assert_eq!(reason, LossReason::NotHeld);
    let next = slow.lock().await.unwrap();
    assert!(next.token().unwrap() > token, "tokens only grow");
    assert!(slow.force_unlock().await.unwrap());
    drop(next);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redisson_spin_lock_holder_excludes_ours_and_reads_our_hold() {
    let redis = TestRedis::any();
    let name = unique_name("redisson-spin");
    let mut con = redis.connection();
    // What Redisson's RSpinLock.lock() writes: the RLock hash, "<uuid>:<thread id>" → count.
    let _: () = con
        .hset(&name, "6c6d4bcb-7e0b-4d0e-9f6b-0f6b5d6a0c1e:57", 1)
        .unwrap();
    let _: () = con.pexpire(&name, 60_000).unwrap();
    let a = client(&redis.url()).await;
    let lock = SpinLock::new(&a, &name).unwrap();
    assert!(lock.try_lock().await.unwrap().is_none());
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.lock().await.unwrap() })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Redisson's RSpinLock unlock at zero: DEL, no message. Ours notices by polling.
    let _: () = con.del(&name).unwrap();
    let guard = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("in well before the 60 s TTL")
        .unwrap();
    let fields: std::collections::HashMap<String, u32> = con.hgetall(&name).unwrap();
    assert_eq!(fields.get(guard.owner().as_str()), Some(&1));
    guard.unlock().await.unwrap();
    let exists: bool = con.exists(&name).unwrap();
    assert!(!exists);
}

/// The server's clock, ms.
fn server_ms(con: &mut redis::Connection) -> u64 {
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query(con).unwrap();
    secs * 1000 + micros / 1000
}

/// The waiter holding the spin lock `name`'s reservation, and since when (server ms).
fn reservation(con: &mut redis::Connection, name: &str) -> Option<(u64, String)> {
    let value: Option<String> = con.get(format!("{{{name}}}:next")).unwrap();
    let value = value?;
    let mut parts = value.splitn(3, '|');
    let (_since, at, owner) = (parts.next()?, parts.next()?, parts.next()?);
    Some((at.parse().unwrap(), owner.to_owned()))
}

/// Tries 1 s apart: a reservation of 4 s (four minimum pauses), and a patience of 4 s.
const SLOW: Backoff = Backoff {
    min: Duration::from_secs(1),
    max: Duration::from_secs(1),
};

/// Waits until a waiter holds the spin lock `name`'s reservation.
async fn until_reserved(redis: &TestRedis, name: &str) {
    eventually(SOON, "the waiter reserves the lock", || {
        let found = reservation(&mut redis.connection(), name).is_some();
        async move { found }
    })
    .await;
}

/// A waiter that has waited holds the next-in-line reservation; once it has stood for the
/// patience, a free lock goes to that waiter only: a try of anyone else fails though nobody
/// holds the lock, until the waiter has taken it (and given it back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standing_reservation_hands_a_free_lock_to_the_longest_waiter() {
    let redis = TestRedis::any();
    let mut con = redis.connection();
    let name = unique_name("spin-next");
    let (a, b, c) = (
        client(&redis.url()).await,
        client(&redis.url()).await,
        client(&redis.url()).await,
    );
    let held = SpinLock::new(&a, &name).unwrap().lock().await.unwrap();
    // A slow poller, so that the lock stays free for a while after the release.
    let waiter = SpinLock::new(&b, &name)
        .unwrap()
        .with_backoff(SLOW)
        .unwrap();
    let waiting = tokio::spawn(async move { waiter.lock().await.unwrap() });
    until_reserved(&redis, &name).await;
    let (at, owner) = reservation(&mut con, &name).unwrap();
    eventually(SOON, "the reservation binds", || {
        let now = server_ms(&mut redis.connection());
        async move { now >= at + 4000 }
    })
    .await;
    held.unlock().await.unwrap();
    let other = SpinLock::new(&c, &name).unwrap();
    assert!(
        other.try_lock().await.unwrap().is_none(),
        "the free lock is the reservation's waiter's ({owner})"
    );
    let guard = tokio::time::timeout(SOON, waiting).await.unwrap().unwrap();
    assert!(
        reservation(&mut con, &name).is_none(),
        "taken with the lock"
    );
    guard.unlock().await.unwrap();
    other
        .try_lock()
        .await
        .unwrap()
        .unwrap()
        .unlock()
        .await
        .unwrap();
}

/// A young reservation does not hold a free lock up (the lock goes to whoever comes until the
/// reservation has stood for its patience), and one whose waiter left ends by itself (it is
/// only ever set with a TTL).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_young_reservation_does_not_bind_and_a_left_one_ends_by_itself() {
    let redis = TestRedis::any();
    let mut con = redis.connection();
    let name = unique_name("spin-left");
    let (a, b) = (client(&redis.url()).await, client(&redis.url()).await);
    let held = SpinLock::new(&a, &name).unwrap().lock().await.unwrap();
    let waiter = SpinLock::new(&b, &name)
        .unwrap()
        .with_backoff(SLOW)
        .unwrap();
    let waiting = tokio::spawn(async move { waiter.lock().await });
    until_reserved(&redis, &name).await;
    let ttl: i64 = con.pttl(format!("{{{name}}}:next")).unwrap();
    assert!(
        ttl > 0 && ttl <= 4000,
        "the reservation carries its TTL: {ttl}"
    );
    held.unlock().await.unwrap();
    // The caller's patience decides (four of its minimum pauses): the same 4 s here.
    let got = SpinLock::new(&a, &name)
        .unwrap()
        .with_backoff(SLOW)
        .unwrap()
        .try_lock()
        .await
        .unwrap();
    let holders: std::collections::HashMap<String, String> = con.hgetall(&name).unwrap();
    let now = server_ms(&mut con);
    let young = reservation(&mut con, &name);
    got.unwrap_or_else(|| {
        panic!(
            "a young reservation does not bind: holders {holders:?}, reservation {young:?} at {now}"
        )
    })
    .unlock()
    .await
    .unwrap();
    waiting.abort();
    let _ = waiting.await;
    eventually(SOON, "the left reservation ends", || {
        let found = reservation(&mut redis.connection(), &name).is_some();
        async move { !found }
    })
    .await;
}
