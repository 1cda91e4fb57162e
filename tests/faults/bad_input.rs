//! Bad input gets a clear error and loses nothing: someone else's key at a synchronizer's name
//! (a string, a hash) is `WrongType` and stays as it was, for every kind and every call that
//! writes, deletes or reads it as a synchronizer; permit counts beyond a semaphore's limit or
//! beyond exact arithmetic are `InvalidArgument` before anything is sent, and a call's memory
//! never grows with the count it asks for.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use common::*;
use ferrisson::{AcquireOptions, Client, Error, Lock, ReentrantLock, SyncObject};
use ferrisson_expirable_semaphore::ExpirableSemaphore;
use ferrisson_fair_lock::FairLock;
use ferrisson_latch::CountDownLatch;
use ferrisson_rate_limiter::{RateLimiter, RateType};
use ferrisson_rwlock::ReadWriteLock;
use ferrisson_semaphore::Semaphore;
use ferrisson_spin_lock::SpinLock;
use redis::Commands;

type Call = Pin<Box<dyn Future<Output = Result<(), Error>> + Send>>;

fn call<T: Send + 'static>(f: impl Future<Output = Result<T, Error>> + Send + 'static) -> Call {
    Box::pin(async move { f.await.map(drop) })
}

/// Every call of a lock kind that writes, deletes or reads the lock's key as a lock.
fn lock_calls<L: Lock + Clone + 'static>(kind: &'static str, lock: L) -> Vec<(String, Call)> {
    let short = AcquireOptions::new().with_wait(Duration::from_millis(200));
    let mut calls: Vec<(String, Call)> = Vec::new();
    let mut add = |what: &str, c: Call| calls.push((format!("{kind}: {what}"), c));
    let l = lock.clone();
    add("try_lock", call(async move { l.try_lock().await }));
    let l = lock.clone();
    add(
        "try_lock_with",
        call(async move { l.try_lock_with(short).await }),
    );
    let l = lock.clone();
    add("force_unlock", call(async move { l.force_unlock().await }));
    let l = lock.clone();
    add("is_locked", call(async move { l.is_locked().await }));
    let l = lock.clone();
    add("exists", call(async move { l.exists().await }));
    let l = lock.clone();
    add(
        "remaining_ttl",
        call(async move { l.remaining_ttl().await }),
    );
    let l = lock.clone();
    add(
        "expire",
        call(async move { l.expire(Duration::from_secs(5)).await }),
    );
    let l = lock.clone();
    add("clear_expire", call(async move { l.clear_expire().await }));
    let l = lock.clone();
    add(
        "wait_unlocked",
        call(async move {
            // Never resolved on a foreign key: its error is what counts.
            tokio::time::timeout(Duration::from_secs(2), l.wait_unlocked())
                .await
                .unwrap_or(Ok(()))
        }),
    );
    add("delete", call(async move { lock.delete().await }));
    calls
}

/// Every call of every kind, on `name`, that must refuse someone else's key there.
async fn every_writing_call(client: &Client, name: &str) -> Vec<(String, Call)> {
    let mut calls = Vec::new();
    calls.extend(lock_calls(
        "reentrant lock",
        ReentrantLock::new(client, name).unwrap(),
    ));
    calls.extend(lock_calls(
        "fenced lock",
        ReentrantLock::fenced(client, name).unwrap(),
    ));
    calls.extend(lock_calls(
        "spin lock",
        SpinLock::new(client, name).unwrap(),
    ));
    calls.extend(lock_calls(
        "fair lock",
        FairLock::new(client, name).unwrap(),
    ));
    let rw = ReadWriteLock::new(client, name).unwrap();
    calls.extend(lock_calls("read lock", rw.read_lock()));
    calls.extend(lock_calls("write lock", rw.write_lock()));
    let r = rw.clone();
    calls.push((
        "read-write lock: mode".into(),
        call(async move { r.mode().await }),
    ));
    let r = rw.clone();
    calls.push((
        "read-write lock: is_locked".into(),
        call(async move { r.is_locked().await }),
    ));

    let semaphore = Semaphore::new(client, name).unwrap();
    let s = || semaphore.clone();
    for (what, c) in [
        ("try_set_permits", {
            let s = s();
            call(async move { s.try_set_permits(3).await })
        }),
        ("set_permits", {
            let s = s();
            call(async move { s.set_permits(3).await })
        }),
        ("add_permits", {
            let s = s();
            call(async move { s.add_permits(3).await })
        }),
        ("try_acquire", {
            let s = s();
            call(async move { s.try_acquire().await })
        }),
        ("release", {
            let s = s();
            call(async move { s.release(1).await })
        }),
        ("release_if_exists", {
            let s = s();
            call(async move { s.release_if_exists(1).await })
        }),
        ("drain_permits", {
            let s = s();
            call(async move { s.drain_permits().await })
        }),
        ("available_permits", {
            let s = s();
            call(async move { s.available_permits().await })
        }),
        ("exists", {
            let s = s();
            call(async move { s.exists().await })
        }),
        ("expire", {
            let s = s();
            call(async move { s.expire(Duration::from_secs(5)).await })
        }),
        ("delete", {
            let s = s();
            call(async move { s.delete().await })
        }),
    ] {
        calls.push((format!("semaphore: {what}"), c));
    }

    let expirable = ExpirableSemaphore::new(client, name).unwrap();
    let e = || expirable.clone();
    for (what, c) in [
        ("try_set_permits", {
            let e = e();
            call(async move { e.try_set_permits(3).await })
        }),
        ("set_permits", {
            let e = e();
            call(async move { e.set_permits(3).await })
        }),
        ("add_permits", {
            let e = e();
            call(async move { e.add_permits(3).await })
        }),
        ("try_acquire", {
            let e = e();
            call(async move {
                e.try_acquire_with(AcquireOptions::new().with_lease(Duration::from_secs(5)))
                    .await
            })
        }),
        ("available_permits", {
            let e = e();
            call(async move { e.available_permits().await })
        }),
        ("exists", {
            let e = e();
            call(async move { e.exists().await })
        }),
        ("expire", {
            let e = e();
            call(async move { e.expire(Duration::from_secs(5)).await })
        }),
        ("delete", {
            let e = e();
            call(async move { e.delete().await })
        }),
    ] {
        calls.push((format!("expirable semaphore: {what}"), c));
    }

    let latch = CountDownLatch::new(client, name).unwrap();
    let l = || latch.clone();
    for (what, c) in [
        ("try_set_count", {
            let l = l();
            call(async move { l.try_set_count(3).await })
        }),
        ("count_down", {
            let l = l();
            call(async move { l.count_down().await })
        }),
        ("count_down_once", {
            let l = l();
            call(async move { l.count_down_once("worker").await })
        }),
        ("count", {
            let l = l();
            call(async move { l.count().await })
        }),
        ("wait_for", {
            let l = l();
            call(async move { l.wait_for(Duration::from_millis(200)).await })
        }),
        ("exists", {
            let l = l();
            call(async move { l.exists().await })
        }),
        ("expire", {
            let l = l();
            call(async move { l.expire(Duration::from_secs(5)).await })
        }),
        ("delete", {
            let l = l();
            call(async move { l.delete().await })
        }),
    ] {
        calls.push((format!("latch: {what}"), c));
    }

    let limiter = RateLimiter::new(client, name).unwrap();
    let r = || limiter.clone();
    let second = Duration::from_secs(1);
    for (what, c) in [
        ("try_set_rate", {
            let r = r();
            call(async move { r.try_set_rate(RateType::Overall, 1, second).await })
        }),
        ("set_rate", {
            let r = r();
            call(async move { r.set_rate(RateType::Overall, 1, second).await })
        }),
        ("try_acquire", {
            let r = r();
            call(async move { r.try_acquire(1).await })
        }),
        ("exists", {
            let r = r();
            call(async move { r.exists().await })
        }),
        ("expire", {
            let r = r();
            call(async move { r.expire(Duration::from_secs(5)).await })
        }),
        ("delete", {
            let r = r();
            call(async move { r.delete().await })
        }),
    ] {
        calls.push((format!("rate limiter: {what}"), c));
    }
    calls
}

/// Someone else's data at a name: every kind's every call refuses it with `WrongType` and
/// leaves it as it was (value and expiry).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn someone_elses_key_is_wrong_type_and_untouched_for_every_kind_and_call() {
    let redis = TestRedis::any();
    let client = client(&redis.url()).await;
    let mut con = redis.connection();

    let string = unique_name("foreign-string");
    let _: () = con.set(&string, "not ours").unwrap();
    let hash = unique_name("foreign-hash");
    let _: () = con.hset(&hash, "name", "bob").unwrap();
    // A hash whose fields look like an owner's hold but which has no expiry: a user's.
    let count_like = unique_name("foreign-hash-rate");
    let _: () = con.hset(&count_like, "rate", "x").unwrap();

    let mut wrong = Vec::new();
    for name in [&string, &hash, &count_like] {
        for (what, c) in every_writing_call(&client, name).await {
            match c.await {
                Err(Error::WrongType { key }) => {
                    assert_eq!(&key, name, "{what}: the error names another key")
                }
                other => wrong.push(format!("{what} on `{name}`: {other:?}")),
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "calls that did not refuse someone else's key:\n{}",
        wrong.join("\n")
    );
    let value: String = con.get(&string).unwrap();
    assert_eq!(value, "not ours");
    let fields: std::collections::HashMap<String, String> = con.hgetall(&hash).unwrap();
    assert_eq!(
        fields,
        std::collections::HashMap::from([("name".into(), "bob".into())])
    );
    let fields: std::collections::HashMap<String, String> = con.hgetall(&count_like).unwrap();
    assert_eq!(
        fields,
        std::collections::HashMap::from([("rate".into(), "x".into())])
    );
    for key in [&string, &hash, &count_like] {
        let ttl: i64 = con.pttl(key).unwrap();
        assert_eq!(ttl, -1, "`{key}` got an expiry");
    }
}

/// Permit counts: above a semaphore's limit, or beyond the integers the scripts count exactly,
/// an `InvalidArgument` before anything is sent; a request for a huge count costs no memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permit_counts_beyond_a_limit_or_exact_arithmetic_are_refused_and_huge_requests_cost_nothing()
 {
    let redis = TestRedis::any();
    let client = client(&redis.url()).await;
    let name = unique_name("counts");
    let mut con = redis.connection();

    // More than the limit could ever give: refused at once, not a wait forever.
    let limited = Semaphore::new(&client, &format!("{name}:limited"))
        .unwrap()
        .with_limit(3)
        .unwrap();
    let refused = tokio::time::timeout(Duration::from_secs(5), limited.acquire_many(4)).await;
    assert!(
        matches!(refused, Ok(Err(Error::InvalidArgument(_)))),
        "{refused:?}"
    );
    let expirable_limited = ExpirableSemaphore::new(&client, &format!("{name}:exp-limited"))
        .unwrap()
        .with_limit(2)
        .unwrap();
    let refused =
        tokio::time::timeout(Duration::from_secs(5), expirable_limited.acquire_many(3)).await;
    assert!(
        matches!(refused, Ok(Err(Error::InvalidArgument(_)))),
        "{refused:?}"
    );
    assert!(
        !con.exists::<_, bool>(format!("{name}:limited")).unwrap(),
        "nothing was sent"
    );
    // Within the limit, as before.
    limited
        .acquire_many(3)
        .await
        .unwrap()
        .release()
        .await
        .unwrap();

    // A huge request of the expirable semaphore: answered at once (no id per permit asked
    // for, in memory or on the wire).
    let expirable = ExpirableSemaphore::new(&client, &format!("{name}:exp")).unwrap();
    assert!(expirable.try_set_permits(2).await.unwrap());
    for n in [u32::MAX, 1_000_000] {
        let started = tokio::time::Instant::now();
        let refused = expirable
            .try_acquire_many_with(n, AcquireOptions::new().with_wait(Duration::ZERO))
            .await
            .unwrap_err();
        assert!(
            matches!(refused, Error::InvalidArgument(_)),
            "{n} permits of 2: {refused:?}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{n} permits asked of 2 took {:?}",
            started.elapsed()
        );
    }
    let two = expirable
        .try_acquire_many_with(
            2,
            AcquireOptions::new()
                .with_wait(Duration::ZERO)
                .with_lease(Duration::from_secs(30)),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(two.len(), 2);
    assert_ne!(two[0].id(), two[1].id());
    for permit in two {
        assert!(
            expirable
                .remaining_lease(permit.id())
                .await
                .unwrap()
                .is_some()
        );
        permit.release().await.unwrap();
    }
    assert_eq!(expirable.available_permits().await.unwrap(), 2);

    // Additions beyond +-(2^53 - 1): refused, and the count stays as it was.
    for semaphore_name in [format!("{name}:plain"), format!("{name}:exp")] {
        let plain = Semaphore::new(&client, &semaphore_name).unwrap();
        let exp = ExpirableSemaphore::new(&client, &semaphore_name).unwrap();
        let _ = plain.try_set_permits(2).await.unwrap();
        let before = plain.available_permits().await.unwrap();
        for delta in [i64::MAX, i64::MIN, (1 << 53), -(1 << 53)] {
            assert!(
                matches!(
                    plain.add_permits(delta).await,
                    Err(Error::InvalidArgument(_))
                ),
                "{semaphore_name}: add_permits({delta})"
            );
            assert!(
                matches!(exp.add_permits(delta).await, Err(Error::InvalidArgument(_))),
                "{semaphore_name}: expirable add_permits({delta})"
            );
        }
        // Each within range, the sum beyond it: refused by the script, nothing changed.
        let max = (1i64 << 53) - 1;
        let err = plain.add_permits(max).await.unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
        assert_eq!(plain.available_permits().await.unwrap(), before);
        // What it answers is what Redis stores.
        let after = plain.add_permits(-max + 10).await.unwrap();
        let stored: i64 = con.get(&semaphore_name).unwrap();
        assert_eq!(after, stored);
        assert_eq!(after, before - max + 10);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn options_with_a_lease_are_refused_where_holds_have_none_and_a_bounded_acquire_times_out() {
    let redis = TestRedis::any();
    let client = client(&redis.url()).await;
    let name = unique_name("options");
    let leased = AcquireOptions::new()
        .with_wait(Duration::from_secs(1))
        .with_lease(Duration::from_secs(5));

    // A semaphore's and a rate limiter's permits have no lease: the options are refused
    // before anything is sent, and nothing is taken.
    let semaphore = Semaphore::new(&client, &format!("{name}:sem")).unwrap();
    assert!(semaphore.try_set_permits(1).await.unwrap());
    let refused = semaphore.try_acquire_with(leased).await;
    assert!(
        matches!(&refused, Err(Error::InvalidArgument(m)) if m.contains("no lease")),
        "{refused:?}"
    );
    let refused = semaphore.try_acquire_many_with(1, leased).await;
    assert!(
        matches!(refused, Err(Error::InvalidArgument(_))),
        "{refused:?}"
    );
    assert_eq!(semaphore.available_permits().await.unwrap(), 1);
    let limiter = RateLimiter::new(&client, &format!("{name}:rate")).unwrap();
    assert!(
        limiter
            .try_set_rate(RateType::Overall, 1, Duration::from_secs(60))
            .await
            .unwrap()
    );
    let refused = limiter.try_acquire_with(1, leased).await;
    assert!(
        matches!(refused, Err(Error::InvalidArgument(_))),
        "{refused:?}"
    );
    assert!(
        limiter.try_acquire(1).await.unwrap(),
        "the refused call took nothing"
    );

    // Without a wait in the options, a `try_*` call tries once.
    let once = semaphore
        .try_acquire_with(AcquireOptions::new())
        .await
        .unwrap()
        .expect("one permit free");
    assert!(
        semaphore
            .try_acquire_with(AcquireOptions::new())
            .await
            .unwrap()
            .is_none()
    );
    once.release().await.unwrap();

    // The expirable semaphore takes the lease; its bounded `acquire_with` ends in `Timeout`
    // (as `lock_with`), its `try_acquire_with` in `None`, and neither leaves a permit taken.
    let expirable = ExpirableSemaphore::new(&client, &format!("{name}:exp")).unwrap();
    assert!(expirable.try_set_permits(1).await.unwrap());
    let permit = expirable.acquire_with(leased).await.unwrap();
    let ttl = expirable.remaining_lease(permit.id()).await.unwrap();
    assert!(
        ttl.is_some_and(|t| t <= Duration::from_secs(5) && t > Duration::from_secs(1)),
        "{ttl:?}"
    );
    let short = AcquireOptions::new().with_wait(Duration::from_millis(100));
    let timed_out = expirable.acquire_with(short).await;
    assert!(matches!(timed_out, Err(Error::Timeout(_))), "{timed_out:?}");
    assert!(expirable.try_acquire_with(short).await.unwrap().is_none());
    assert_eq!(expirable.available_permits().await.unwrap(), 0);
    permit.release().await.unwrap();
    assert_eq!(expirable.available_permits().await.unwrap(), 1);
}

/// An acquire of more permits than the expirable semaphore has in all (free and taken) is
/// `InvalidArgument` at once, for waiting calls and tries alike, and takes nothing: a wait for
/// them would never end, and `None` would read as "busy". Up to the total, a call waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_asks_are_refused_at_once_and_take_nothing() {
    let server = RedisServer::spawn();
    let client = client(&server.url()).await;
    let sem = ExpirableSemaphore::new(&client, &unique_name("over-ask")).unwrap();
    sem.set_permits(3).await.unwrap();
    let held = sem.acquire().await.unwrap();
    let refused = tokio::time::timeout(Duration::from_secs(5), sem.acquire_many(4))
        .await
        .expect("an over-ask is answered at once, not after a wait");
    let err = refused.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    assert!(err.to_string().contains("3 in all"), "{err}");
    for n in [4, 1_000_000, u32::MAX] {
        let err = sem.try_acquire_many(n).await.unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{n}: {err:?}");
        let err = sem
            .try_acquire_many_with(n, AcquireOptions::new().with_wait(Duration::from_secs(1)))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{n}: {err:?}");
    }
    assert_eq!(sem.available_permits().await.unwrap(), 2, "nothing taken");
    assert_eq!(sem.acquired_permits().await.unwrap(), 1);
    // The total counts taken permits: three can be waited for while one is held.
    let waiter = {
        let sem = sem.clone();
        tokio::spawn(async move { sem.acquire_many(3).await })
    };
    held.release().await.unwrap();
    let three = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("the three permits come")
        .unwrap()
        .unwrap();
    assert_eq!(three.len(), 3);
}

/// Rates beyond what the scripts count exactly are refused before anything is written, and no
/// acquire against a limiter yields a raw script error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rates_beyond_exact_arithmetic_are_refused_and_nothing_raw_reaches_the_user() {
    let server = RedisServer::spawn();
    let client = client(&server.url()).await;
    let limiter = RateLimiter::new(&client, &unique_name("huge-rate")).unwrap();
    for rate in [u64::MAX, 1 << 53] {
        let err = limiter
            .set_rate(RateType::Overall, rate, Duration::from_secs(1))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{rate}: {err:?}");
    }
    assert!(limiter.rate().await.unwrap().is_none(), "nothing written");
    let most = (1 << 53) - 1;
    limiter
        .set_rate(RateType::Overall, most, Duration::from_secs(1))
        .await
        .unwrap();
    assert!(limiter.try_acquire(u32::MAX).await.unwrap());
    assert!(limiter.try_acquire(u32::MAX).await.unwrap());
    assert_eq!(
        limiter.available_permits().await.unwrap(),
        most - 2 * u64::from(u32::MAX)
    );
    limiter.release(u32::MAX).await.unwrap();
    // Per client too.
    limiter
        .set_rate(RateType::PerClient, most, Duration::from_secs(1))
        .await
        .unwrap();
    assert!(limiter.try_acquire(u32::MAX).await.unwrap());
}
