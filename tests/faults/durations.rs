//! Any `Duration` a caller passes is used as given or refused with a clear error: never a
//! panic, never a lease truncated into a shorter one than the client believes it holds.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common;

use ferrisson::{Lock, SyncObject};

use std::time::Duration;

use common::{RedisServer, client, unique_name};
use ferrisson::{AcquireOptions, Client, ClientConfig, Error, LossReason, ReentrantLock};
use ferrisson_testkit::FaultProxy;

/// u64::MAX ms + 1,001 ms: a cast to milliseconds as u64 wraps it to a 1 s server TTL.
fn wrapping_lease() -> Duration {
    Duration::from_millis(u64::MAX) + Duration::from_millis(1001)
}

/// Held by one acquisition, `lock` is taken by a waiter with `endless` options once released,
/// and `lock_with` the same options takes it at once when free.
async fn endless_wait_gets_in<L: Lock + Clone + 'static>(lock: &L, endless: AcquireOptions) {
    let held = lock.lock().await.unwrap();
    let waiter = tokio::spawn({
        let lock = lock.clone();
        async move { lock.try_lock_with(endless).await }
    });
    held.unlock().await.unwrap();
    let got = waiter.await.unwrap().unwrap().expect("taken once free");
    got.unlock().await.unwrap();
    let again = lock.lock_with(endless).await.unwrap();
    again.unlock().await.unwrap();
}

#[tokio::test]
async fn an_endless_wait_is_no_limit_for_every_kind() {
    let server = RedisServer::spawn();
    let client = client(&server.url()).await;
    let endless = AcquireOptions::new().with_wait(Duration::MAX);

    // Every lock kind, through the one trait: a waiter with no limit gets in once free.
    let lock = ReentrantLock::new(&client, &unique_name("dur-lock")).unwrap();
    let fair = ferrisson_fair_lock::FairLock::new(&client, &unique_name("dur-fair")).unwrap();
    let rw = ferrisson_rwlock::ReadWriteLock::new(&client, &unique_name("dur-rw")).unwrap();
    endless_wait_gets_in(&lock, endless).await;
    endless_wait_gets_in(&fair, endless).await;
    endless_wait_gets_in(&rw.write_lock(), endless).await;

    let semaphore = ferrisson_semaphore::Semaphore::new(&client, &unique_name("dur-sem")).unwrap();
    semaphore.try_set_permits(1).await.unwrap();
    assert!(
        semaphore
            .try_acquire_with(AcquireOptions::new().with_wait(Duration::MAX))
            .await
            .unwrap()
            .is_some()
    );
    let expirable =
        ferrisson_expirable_semaphore::ExpirableSemaphore::new(&client, &unique_name("dur-exp"))
            .unwrap();
    expirable.try_set_permits(1).await.unwrap();
    let permit = expirable
        .try_acquire_with(AcquireOptions::new().with_wait(Duration::MAX))
        .await
        .unwrap()
        .expect("a free permit");
    permit.release().await.unwrap();

    let latch = ferrisson_latch::CountDownLatch::new(&client, &unique_name("dur-latch")).unwrap();
    latch.try_set_count(1).await.unwrap();
    let waiting = tokio::spawn({
        let latch = latch.clone();
        async move { latch.wait_for(Duration::MAX).await }
    });
    latch.count_down().await.unwrap();
    assert!(waiting.await.unwrap().unwrap());
}

#[tokio::test]
async fn a_lease_redis_cannot_take_is_refused_before_anything_is_sent() {
    let server = RedisServer::spawn();
    let client = client(&server.url()).await;
    let name = unique_name("dur-lease");
    let lock = ReentrantLock::new(&client, &name).unwrap();
    for lease in [Duration::ZERO, Duration::MAX, wrapping_lease()] {
        let err = lock
            .lock_with(AcquireOptions::new().with_lease(lease))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{lease:?}: {err}");
    }
    assert!(!lock.is_locked().await.unwrap(), "nothing was taken");
    let longest = AcquireOptions::new().with_lease(ferrisson::core::duration::MAX_LEASE);
    let guard = lock.lock_with(longest).await.unwrap();
    // The server holds it for as long as the client believes, not a wrapped second.
    assert!(lock.remaining_ttl().await.unwrap().unwrap() > Duration::from_secs(3600 * 24 * 365));
    guard.unlock().await.unwrap();

    let expirable = ferrisson_expirable_semaphore::ExpirableSemaphore::new(&client, &name).unwrap();
    expirable.try_set_permits(1).await.unwrap();
    for lease in [Duration::ZERO, Duration::MAX, wrapping_lease()] {
        let err = expirable
            .try_acquire_with(AcquireOptions::new().with_lease(lease))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{lease:?}: {err}");
    }
    assert_eq!(expirable.available_permits().await.unwrap(), 1);
}

#[tokio::test]
async fn client_settings_of_any_length_are_checked_not_panicked_on() {
    let server = RedisServer::spawn();
    for lease in [Duration::MAX, wrapping_lease()] {
        let err = Client::with_config(ClientConfig::new(server.url()).with_lease(lease))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{lease:?}: {err}");
    }
    let patient = ClientConfig::new(server.url())
        .with_response_timeout(Duration::MAX)
        .with_wait_outage_limit(Duration::MAX);
    let client = Client::with_config(patient).await.unwrap();
    let lock = ReentrantLock::new(&client, &unique_name("dur-client")).unwrap();
    lock.lock().await.unwrap().unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_slower_than_the_lease_gives_a_guard_that_says_so() {
    let server = RedisServer::spawn();
    let proxy = FaultProxy::start(server.port());
    let config = ClientConfig::new(proxy.url())
        .with_lease(Duration::from_millis(150))
        .with_response_timeout(Duration::from_secs(5));
    let client = Client::with_config(config).await.unwrap();
    let lock = ReentrantLock::new(&client, &unique_name("dur-slow")).unwrap();
    proxy.delay_replies(Duration::from_millis(400));
    let guard = lock.lock().await.unwrap();
    assert_eq!(guard.loss_reason(), Some(LossReason::ExpiredInFlight));
    assert!(matches!(
        guard.ensure_held(),
        Err(Error::LeaseLost(LossReason::ExpiredInFlight))
    ));
    proxy.delay_replies(Duration::ZERO);
    drop(guard);
}
