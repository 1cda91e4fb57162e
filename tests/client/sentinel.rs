//! Synchronizers on a local Redis Sentinel set-up (one primary, one replica, three sentinels):
//! the `redis-sentinel://` URL, and every synchronizer's holds and waiters across a primary
//! kill, with the loss signal when the promoted replica does not have the lease.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common;

use std::time::Duration;

use common::every_kind::{EveryKind, KindNames};
use common::*;
use ferrisson::{Client, ClientConfig, Lock, ReentrantLock};
use ferrisson_testkit::RedisSentinel;

async fn sentinel_client(setup: &RedisSentinel, lease: Duration) -> Client {
    connect(ClientConfig::new(setup.url()), lease).await
}

async fn connect(config: ClientConfig, lease: Duration) -> Client {
    Client::with_config(
        config
            .with_lease(lease)
            .with_response_timeout(Duration::from_secs(2))
            .with_connect_timeout(Duration::from_secs(1)),
    )
    .await
    .unwrap_or_else(|e| panic!("connecting through the sentinels: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_synchronizer_carries_on_across_a_primary_kill() {
    let mut setup = RedisSentinel::spawn();
    // A lease longer than the failover takes (1 s to call the primary down, then a vote).
    let holder = sentinel_client(&setup, Duration::from_secs(8)).await;
    let waiting = sentinel_client(&setup, Duration::from_secs(30)).await;
    let names = KindNames::unique("sentinel");
    let held = EveryKind::hold(&holder, &names).await;
    let waiters = held.waiters(&waiting, &names);
    let old = setup.primary_port();
    eventually(
        Duration::from_secs(10),
        "the waiters subscribed",
        || async {
            subscriber_connections(&mut setup.node(old).connection()) >= 1
                && waiting.waiter_stats().1 >= KindNames::KINDS
        },
    )
    .await;
    // Replica sync (on by default) made sure the replica has every hold.
    setup.node_mut(old).stop();
    let new = setup.wait_for_failover(old);

    // The holder's renewals moved to the new primary and kept the lock past its first lease.
    tokio::time::sleep(Duration::from_secs(9)).await;
    assert!(
        held.lock().ensure_held().is_ok(),
        "{:?}",
        held.lock().loss_reason()
    );
    let mut con = setup.node(new).connection();
    let ttl: i64 = redis::cmd("PTTL").arg(&names.lock).query(&mut con).unwrap();
    assert!(
        ttl > 0,
        "the lock is on the new primary with a lease ({ttl})"
    );
    // The waiting client's subscriber connection followed as well.
    eventually(
        Duration::from_secs(10),
        "the subscriber connection moved to the new primary",
        || async { subscriber_connections(&mut setup.node(new).connection()) >= 1 },
    )
    .await;

    held.release().await;
    join_within(
        Duration::from_secs(20),
        "every waiter gets its lock, permit or open latch (tokens grow across the failover)",
        waiters,
    )
    .await;
    // A new client finds the new primary through the sentinels.
    let late = sentinel_client(&setup, Duration::from_secs(30)).await;
    let guard = ReentrantLock::new(&late, &names.lock)
        .unwrap()
        .try_lock()
        .await
        .unwrap()
        .expect("free");
    guard.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_that_loses_a_lease_is_reported_to_the_holder() {
    let mut setup = RedisSentinel::spawn();
    // Without replica sync (which would refuse the acquisition below, see replica_sync.rs).
    let holder = connect(
        ClientConfig::new(setup.url()).without_replica_sync(),
        Duration::from_secs(3),
    )
    .await;
    let name = unique_name("sentinel-lost");
    let old = setup.primary_port();
    let replica = setup.other(old);

    // The replica misses the acquisition: frozen while it happens, then its primary dies.
    setup.node(replica).pause();
    // Cut the replication link while the replica is frozen: what the primary writes from now
    // on never reaches the replica's socket buffer.
    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("replica")
        .query(&mut setup.node(old).connection())
        .unwrap();
    let guard = ReentrantLock::new(&holder, &name)
        .unwrap()
        .lock()
        .await
        .unwrap();
    setup.node_mut(old).stop();
    setup.node(replica).resume();
    assert_eq!(setup.wait_for_failover(old), replica);

    let reason = tokio::time::timeout(Duration::from_secs(20), guard.lost())
        .await
        .unwrap_or_else(|_| panic!("the holder was never told its lease was lost"));
    assert!(guard.ensure_held().is_err(), "{reason:?}");
    let other = sentinel_client(&setup, Duration::from_secs(30)).await;
    let next = ReentrantLock::new(&other, &name)
        .unwrap()
        .try_lock()
        .await
        .unwrap()
        .expect("the lock is free on the new primary");
    next.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sentinel_config_and_url_forms_connect() {
    let setup = RedisSentinel::spawn();
    let by_config = Client::with_config(ClientConfig::sentinel(
        setup.sentinel_urls(),
        setup.primary_name(),
    ))
    .await
    .unwrap();
    let by_url = Client::connect(&setup.url()).await.unwrap();
    let name = unique_name("sentinel-forms");
    let guard = ReentrantLock::new(&by_config, &name)
        .unwrap()
        .lock()
        .await
        .unwrap();
    assert!(
        ReentrantLock::new(&by_url, &name)
            .unwrap()
            .is_locked()
            .await
            .unwrap()
    );
    guard.unlock().await.unwrap();
    // A primary name the sentinels do not know is an error, not a hang.
    let unknown = Client::with_config(
        ClientConfig::sentinel(setup.sentinel_urls(), "no-such-primary")
            .with_connect_timeout(Duration::from_secs(2)),
    )
    .await;
    assert!(unknown.is_err());
}

/// A `Mutex` waiter behind another Redlock client's hold is told of the release by Redis
/// (tracking) through the sentinels, and again after a failover: its subscriber connection
/// follows the new primary, its next try arms tracking there, and the peer's release on the
/// new primary wakes it (no wake-up missed, no re-check needed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tracked_mutex_waiter_is_told_of_a_foreign_release_after_a_failover() {
    let mut setup = RedisSentinel::spawn();
    let waiting = sentinel_client(&setup, Duration::from_secs(30)).await;
    let name = unique_name("sentinel-tracked");
    let old = setup.primary_port();
    let mut con = setup.node(old).connection();
    // A peer's hold (no ferrisson owner's token), on the replica too before the kill.
    let token = "5b1c0e7f9a2d4c68b3e1f0a7c9d2e4b6";
    let set: Option<String> = redis::cmd("SET")
        .arg(&name)
        .arg(token)
        .arg("NX")
        .arg("PX")
        .arg(120_000)
        .query(&mut con)
        .unwrap();
    assert!(set.is_some());
    let acked: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(5_000)
        .query(&mut con)
        .unwrap();
    assert_eq!(acked, 1, "the replica has the peer's hold");
    let mutex = ferrisson::Mutex::new(&waiting, &name).unwrap();
    let waiter = tokio::spawn(async move {
        mutex
            .try_lock_with(ferrisson::AcquireOptions::new().with_wait(Duration::from_secs(60)))
            .await
    });
    eventually(Duration::from_secs(10), "the waiter armed tracking", || {
        std::future::ready(waiting.tracking_stats().armed >= 1)
    })
    .await;
    let armed = waiting.tracking_stats().armed;
    setup.node_mut(old).stop();
    let new = setup.wait_for_failover(old);
    eventually(
        Duration::from_secs(20),
        "the waiter armed tracking on the new primary",
        || std::future::ready(waiting.tracking_stats().armed > armed),
    )
    .await;
    let deleted: i64 = redis::cmd("EVAL")
        .arg("if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0")
        .arg(1)
        .arg(&name)
        .arg(token)
        .query(&mut setup.node(new).connection())
        .unwrap();
    assert_eq!(deleted, 1, "the peer's hold moved to the new primary");
    let guard = tokio::time::timeout(Duration::from_secs(20), waiter)
        .await
        .expect("in after the peer's release")
        .unwrap()
        .unwrap()
        .expect("taken");
    let stats = waiting.tracking_stats();
    assert_eq!(stats.missed, 0, "woken by the invalidation: {stats:?}");
    assert!(stats.invalidations >= 1, "{stats:?}");
    guard.unlock().await.unwrap();
}
