//! A release whose caller leaves while its call is on its way still reaches Redis once: the
//! semaphores' and the rate limiter's releases go through one engine call
//! (`RecordedCall::send_through`) that sends an abandoned release again in the background,
//! under its record slot, so a late first copy changes nothing more.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common::*;
use crate::late_copies::deliver_late;
use crate::lost_replies::slow_retry_client;

use std::time::Duration;

use ferrisson::{Client, ExpirableSemaphore, Semaphore};
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
