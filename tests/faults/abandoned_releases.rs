//! A release whose caller leaves while its call is on its way still reaches Redis once: the
//! semaphores' and the rate limiter's releases go through one engine call
//! (`RecordedCall::send_through`) that sends an abandoned release again in the background,
//! under its record slot, so a late first copy changes nothing more. A lock release that hands
//! the lock to a local waiter, abandoned, gives the waiter the lock once: the hand-off nobody
//! was told of is undone, and the waiter's own tries wait until it is.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common::*;
use crate::late_copies::deliver_late;
use crate::lost_replies::slow_retry_client;

use std::time::Duration;

use ferrisson::{Client, ExpirableSemaphore, FairLock, Lock, ReentrantLock, Semaphore};
use ferrisson_rate_limiter::{RateLimiter, RateType};
use ferrisson_testkit::FaultProxy;
use futures::future::BoxFuture;

/// Holds back the first copy of `release` (the proxy cuts the client's connection with the
/// request kept from Redis), then drops the call while the client waits to send it again; the
/// held copy arrives only after `settled` holds, which only the background resend can make
/// true. Then the late copy is delivered: `settled` must still hold.
async fn abandon(
    proxy: &FaultProxy,
    name: &str,
    release: BoxFuture<'static, ()>,
    settled: impl Fn() -> BoxFuture<'static, bool>,
) {
    let held = proxy.requests_held();
    proxy.hold_next_request(name);
    let call = tokio::spawn(release);
    eventually(
        Duration::from_secs(10),
        "the release's first copy held back",
        || async { proxy.requests_held() > held },
    )
    .await;
    // Within the client's 300 ms pause before its resend: the caller leaves.
    call.abort();
    let _ = call.await;
    proxy.hold_no_request();
    eventually(
        Duration::from_secs(10),
        "the abandoned release given back by its resend",
        &settled,
    )
    .await;
    deliver_late(proxy).await;
    assert!(
        settled().await,
        "the late first copy released a second time"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releases_whose_callers_leave_reach_redis_once() {
    let server = RedisServer::spawn();
    let proxy = FaultProxy::start(server.port());
    let direct = Client::connect(&server.url()).await.unwrap();
    // Leases of 600 s: nothing comes back by expiring within the test.
    let client = slow_retry_client(&proxy, Duration::from_millis(300)).await;

    // A permit-expirable semaphore's permit.
    let name = unique_name("abandoned-xsem");
    let counted = ExpirableSemaphore::new(&direct, &name).unwrap();
    counted.try_set_permits(3).await.unwrap();
    let semaphore = ExpirableSemaphore::new(&client, &name).unwrap();
    semaphore.acquire().await.unwrap().release().await.unwrap();
    let permit = semaphore.acquire().await.unwrap();
    assert_eq!(counted.available_permits().await.unwrap(), 2);
    let watched = counted.clone();
    abandon(
        &proxy,
        &name,
        Box::pin(async move { drop(permit.release().await) }),
        move || {
            let counted = watched.clone();
            Box::pin(async move {
                counted.available_permits().await.unwrap() == 3
                    && counted.acquired_permits().await.unwrap() == 0
            })
        },
    )
    .await;

    // A semaphore's permits.
    let name = unique_name("abandoned-sem");
    let counted = Semaphore::new(&direct, &name).unwrap();
    counted.try_set_permits(3).await.unwrap();
    let semaphore = Semaphore::new(&client, &name).unwrap();
    semaphore.acquire().await.unwrap().release().await.unwrap();
    let permits = semaphore.acquire_many(2).await.unwrap();
    assert_eq!(counted.available_permits().await.unwrap(), 1);
    let watched = counted.clone();
    abandon(
        &proxy,
        &name,
        Box::pin(async move { drop(permits.release().await) }),
        move || {
            let counted = watched.clone();
            Box::pin(async move { counted.available_permits().await.unwrap() == 3 })
        },
    )
    .await;

    // A rate limiter's permits given back.
    let name = unique_name("abandoned-rate");
    let steady = RateLimiter::new(&direct, &name).unwrap();
    steady
        .set_rate(RateType::Overall, 10, Duration::from_secs(3600))
        .await
        .unwrap();
    let limiter = RateLimiter::new(&client, &name).unwrap();
    assert!(limiter.try_acquire(4).await.unwrap());
    assert_eq!(steady.available_permits().await.unwrap(), 6);
    let releasing = limiter.clone();
    let watched = steady.clone();
    abandon(
        &proxy,
        &name,
        Box::pin(async move { drop(releasing.release(4).await) }),
        move || {
            let steady = watched.clone();
            Box::pin(async move { steady.available_permits().await.unwrap() == 10 })
        },
    )
    .await;
}

/// The fields of the lock hash `name`: its holders.
async fn holders(con: &mut redis::aio::MultiplexedConnection, name: &str) -> Vec<String> {
    redis::cmd("HKEYS")
        .arg(name)
        .query_async(con)
        .await
        .unwrap()
}

/// A release that hands the lock to a local waiter, whose caller leaves while its outcome is
/// unknown, gives the lock to nobody for a lease: the background resend learns what the call
/// did, and a hand-off the waiter was never told of is given back, so the waiter takes the lock
/// itself at once (the leases here are 600 s). Two ways the outcome is unknown: the call ran
/// and its reply was lost (the resend finds the hand-off in the record and undoes it), and the
/// call was held back on its way (the resend frees the lock, and the late first copy changes
/// nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_release_that_hands_off_leaves_the_lock_to_its_waiter() {
    let server = RedisServer::spawn();
    let proxy = FaultProxy::start(server.port());
    let con = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let client = slow_retry_client(&proxy, Duration::from_millis(300)).await;
    for reply_lost in [true, false] {
        let name = unique_name("abandoned-hand-off");
        let lock = ReentrantLock::new(&client, &name).unwrap();
        abandon_hand_off(&proxy, &client, con.clone(), lock, &name, reply_lost, false).await;
        let name = unique_name("abandoned-hand-off-fenced");
        let lock = ReentrantLock::fenced(&client, &name).unwrap();
        abandon_hand_off(&proxy, &client, con.clone(), lock, &name, reply_lost, true).await;
        let name = unique_name("abandoned-hand-off-fair");
        let lock = FairLock::new(&client, &name).unwrap();
        abandon_hand_off(&proxy, &client, con.clone(), lock, &name, reply_lost, false).await;
    }
}

/// One case of [`an_abandoned_release_that_hands_off_leaves_the_lock_to_its_waiter`] on
/// `lock` (named `name`, on `client`, through `proxy`).
async fn abandon_hand_off<L: Lock + Clone + Send + Sync + 'static>(
    proxy: &FaultProxy,
    client: &Client,
    mut con: redis::aio::MultiplexedConnection,
    lock: L,
    name: &str,
    reply_lost: bool,
    fenced: bool,
) {
    let name = name.to_owned();
    // Warm up: the scripts are loaded before the proxy holds anything back.
    lock.lock().await.unwrap().unlock().await.unwrap();
    let guard = lock.lock().await.unwrap();
    let first = holders(&mut con, &name).await;
    let waiting = lock.clone();
    let waiter = tokio::spawn(async move { waiting.lock().await.unwrap() });
    eventually(Duration::from_secs(10), "the waiter waits", || async {
        client.waiter_stats().1 == 1
    })
    .await;
    if reply_lost {
        proxy.delay_replies(Duration::from_secs(5));
        let release = tokio::spawn(async move { drop(guard.unlock().await) });
        eventually(
            Duration::from_secs(10),
            "the release ran in Redis: the lock handed to the waiter",
            || {
                let mut con = con.clone();
                let (name, first) = (name.clone(), first.clone());
                async move {
                    let now = holders(&mut con, &name).await;
                    !now.is_empty() && now != first
                }
            },
        )
        .await;
        // The reply is lost; within the client's 300 ms pause before its resend, the
        // caller leaves.
        proxy.cut_connections();
        proxy.delay_replies(Duration::ZERO);
        release.abort();
        let _ = release.await;
    } else {
        let held = proxy.requests_held();
        proxy.hold_next_request(&name);
        let release = tokio::spawn(async move { drop(guard.unlock().await) });
        eventually(
            Duration::from_secs(10),
            "the release's first copy held back",
            || async { proxy.requests_held() > held },
        )
        .await;
        release.abort();
        let _ = release.await;
        proxy.hold_no_request();
    }
    let guard = tokio::time::timeout(Duration::from_secs(20), waiter)
        .await
        .unwrap_or_else(|_| panic!("the waiter on {name} still waits (reply lost {reply_lost}): the abandoned hand-off was not given back"))
        .unwrap();
    if fenced {
        assert!(guard.token().is_some());
    }
    if !reply_lost {
        // The held first copy (a hand-off to this waiter's owner) arrives after all.
        deliver_late(proxy).await;
    }
    // The waiter holds the lock once, and nobody else does.
    assert_eq!(holders(&mut con, &name).await, [guard.owner().to_string()]);
    let count: u64 = redis::cmd("HGET")
        .arg(&name)
        .arg(guard.owner().to_string())
        .query_async(&mut con)
        .await
        .unwrap();
    assert_eq!(count, 1);
    guard.unlock().await.unwrap();
    assert!(holders(&mut con, &name).await.is_empty());
}
