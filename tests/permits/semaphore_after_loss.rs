//! Semaphores after Redis lost their count (a restart without persistence, `FLUSHALL`): one
//! built with a limit restores it and keeps to it; one without fails a wait clearly instead of
//! hanging.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common;

use std::time::Duration;

use common::*;
use ferrisson::AcquireOptions;
use ferrisson::Error;
use ferrisson_expirable_semaphore::ExpirableSemaphore;
use ferrisson_semaphore::Semaphore;

fn flushall(server: &RedisServer) {
    let _: () = redis::cmd("FLUSHALL")
        .query(&mut server.connection())
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limited_semaphore_restores_its_count_and_releases_never_raise_it_past_the_limit() {
    let mut server = RedisServer::spawn();
    let client = client(&server.url()).await;
    let semaphore = Semaphore::new(&client, &unique_name("sem-limit"))
        .unwrap()
        .with_limit(3)
        .unwrap();
    // No try_set_permits: the first acquire sets the count to the limit.
    let before = semaphore.acquire_many(2).await.unwrap();
    assert_eq!(semaphore.available_permits().await.unwrap(), 1);
    server.restart();
    // Everything was lost, holders included: the whole limit is free again.
    let after = semaphore.acquire().await.unwrap();
    assert_eq!(semaphore.available_permits().await.unwrap(), 2);
    // The holders from before the loss give back permits the restore already counted: that
    // changes nothing (they were taken in an older epoch), so the limit does not grow.
    before.release().await.unwrap();
    assert_eq!(semaphore.available_permits().await.unwrap(), 2);
    after.release().await.unwrap();
    assert_eq!(semaphore.available_permits().await.unwrap(), 3);
    // A release of unknown origin (Redisson's) counts, but never past the limit.
    semaphore.release(2).await.unwrap();
    assert_eq!(semaphore.available_permits().await.unwrap(), 3);
    let all = semaphore.acquire_many(3).await.unwrap();
    assert!(semaphore.try_acquire().await.unwrap().is_none());
    all.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_of_a_limited_semaphore_gets_its_permit_after_a_restart() {
    let mut server = RedisServer::spawn();
    let client = client(&server.url()).await;
    let semaphore = Semaphore::new(&client, &unique_name("sem-limit-wait"))
        .unwrap()
        .with_limit(1)
        .unwrap();
    let held = semaphore.acquire().await.unwrap();
    let waiter = {
        let semaphore = semaphore.clone();
        tokio::spawn(async move { semaphore.acquire().await })
    };
    eventually(Duration::from_secs(5), "the waiter waits", || async {
        client.waiter_stats().1 == 1
    })
    .await;
    server.restart();
    // The holder is gone with the data; the waiter is woken by the reconnect and takes the
    // restored permit, well within the lease-long re-check.
    let permit = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("the waiter is served after the restart")
        .unwrap()
        .unwrap();
    held.forget();
    permit.release().await.unwrap();
    assert_eq!(semaphore.available_permits().await.unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semaphore_without_a_limit_fails_a_wait_on_a_lost_count_instead_of_hanging() {
    let mut server = RedisServer::spawn();
    let client = client(&server.url()).await;
    let semaphore = Semaphore::new(&client, &unique_name("sem-nolimit")).unwrap();
    assert!(semaphore.try_set_permits(1).await.unwrap());
    let held = semaphore.acquire().await.unwrap();
    let waiter = {
        let semaphore = semaphore.clone();
        tokio::spawn(async move { semaphore.acquire().await })
    };
    eventually(Duration::from_secs(5), "the waiter waits", || async {
        client.waiter_stats().1 == 1
    })
    .await;
    server.restart();
    // Woken by the reconnect, the waiter's next try finds no count: a wait that could never
    // end is an error, not a hang (Redisson's waits for ever).
    let outcome = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("the waiter does not hang")
        .unwrap();
    assert!(
        matches!(outcome, Err(Error::NotSetUp(_))),
        "expected NotSetUp, got {outcome:?}"
    );
    // A new wait fails at once; a try finds nothing, as Redisson's would.
    assert!(matches!(semaphore.acquire().await, Err(Error::NotSetUp(_))));
    assert!(semaphore.try_acquire().await.unwrap().is_none());
    assert!(matches!(
        semaphore
            .try_acquire_with(AcquireOptions::new().with_wait(Duration::from_millis(50)))
            .await,
        Err(Error::NotSetUp(_))
    ));
    // The holder from before the loss: its release recreates a count, as Redisson's does.
    held.release().await.unwrap();
    assert_eq!(semaphore.available_permits().await.unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limited_expirable_semaphore_restores_its_count_less_the_permits_still_held() {
    let server = RedisServer::spawn();
    let client = client(&server.url()).await;
    let semaphore = ExpirableSemaphore::new(&client, &unique_name("xsem-limit"))
        .unwrap()
        .with_limit(3)
        .unwrap();
    let before = semaphore.acquire().await.unwrap();
    assert_eq!(semaphore.available_permits().await.unwrap(), 2);
    // Only the count is lost (a deleted key): the held permit still counts against the limit.
    let _: () = redis::cmd("DEL")
        .arg(semaphore.key())
        .query(&mut server.connection())
        .unwrap();
    let two = semaphore.acquire_many(2).await.unwrap();
    assert!(semaphore.try_acquire().await.unwrap().is_none());
    // Everything is lost: the whole limit is free, and the old permits are not held any more.
    flushall(&server);
    let three = semaphore.acquire_many(3).await.unwrap();
    assert!(matches!(before.release().await, Err(Error::NotOwner(_))));
    for permit in two {
        assert!(permit.release().await.is_err());
    }
    assert_eq!(semaphore.available_permits().await.unwrap(), 0);
    for permit in three {
        permit.release().await.unwrap();
    }
    assert_eq!(semaphore.available_permits().await.unwrap(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expirable_semaphore_without_a_limit_fails_a_wait_on_a_missing_count() {
    let server = RedisServer::spawn();
    let client = client(&server.url()).await;
    let semaphore = ExpirableSemaphore::new(&client, &unique_name("xsem-nolimit")).unwrap();
    assert!(matches!(semaphore.acquire().await, Err(Error::NotSetUp(_))));
    assert!(semaphore.try_acquire().await.unwrap().is_none());
    assert!(semaphore.try_set_permits(1).await.unwrap());
    let permit = semaphore.acquire().await.unwrap();
    permit.release().await.unwrap();
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_of_zero_are_refused() {
    let server = RedisServer::spawn();
    let client = client(&server.url()).await;
    let name = unique_name("limit-zero");
    assert!(matches!(
        Semaphore::new(&client, &name).unwrap().with_limit(0),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        ExpirableSemaphore::new(&client, &name)
            .unwrap()
            .with_limit(0),
        Err(Error::InvalidArgument(_))
    ));
}
