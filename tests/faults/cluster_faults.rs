//! Synchronizers on a local Redis Cluster through its faults: sharded pub/sub with one
//! subscriber connection per shard, waiters following a slot migration and a primary failover,
//! renewals carrying on after both, and the loss signal when a failover loses a lease.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common;

use std::time::Duration;

use common::every_kind::{EveryKind, KindNames, lock_all, lock_waiters};
use common::*;
use ferrisson::{Client, ClientConfig, Lock, PublishCommand, ReentrantLock};
use ferrisson_latch::CountDownLatch;
use ferrisson_testkit::RedisCluster;

async fn cluster_client(cluster: &RedisCluster, lease: Duration) -> Client {
    connect(ClientConfig::cluster(cluster.urls()), lease).await
}

async fn connect(config: ClientConfig, lease: Duration) -> Client {
    Client::with_config(
        config
            .with_lease(lease)
            .with_response_timeout(Duration::from_secs(2)),
    )
    .await
    .unwrap_or_else(|e| panic!("connecting to the cluster: {e}"))
}

/// Shard channels subscribed on the node on `port` (`PUBSUB SHARDCHANNELS`).
fn shard_channels(cluster: &RedisCluster, port: u16) -> Vec<String> {
    redis::cmd("PUBSUB")
        .arg("SHARDCHANNELS")
        .query(&mut cluster.node(port).connection())
        .unwrap()
}

fn lock_channel(name: &str) -> String {
    ferrisson_testkit::redisson_name("redisson_lock__channel", name)
}

/// A name (with a hash tag when `tagged`) whose slot is on the primary on `port`.
fn name_on(cluster: &RedisCluster, port: u16, prefix: &str, tagged: bool) -> String {
    loop {
        let base = unique_name(prefix);
        let name = if tagged {
            format!("{{{base}}}:job")
        } else {
            base
        };
        if cluster.primary_for(&name).port() == port {
            return name;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_use_sharded_pubsub_with_one_subscriber_connection_per_shard() {
    let cluster = RedisCluster::spawn();
    let holder = cluster_client(&cluster, Duration::from_secs(30)).await;
    let waiting = cluster_client(&cluster, Duration::from_secs(30)).await;
    assert_eq!(
        waiting.config().publish_command(),
        PublishCommand::Spublish,
        "Redis 7 has sharded pub/sub: the client uses it"
    );
    // Names with and without hash tags on every primary, each held, each with waiters.
    let mut names = Vec::new();
    for port in cluster.primary_ports() {
        for i in 0..20 {
            names.push(name_on(&cluster, port, "sharded", i % 2 == 0));
        }
    }
    let guards = lock_all(&holder, &names).await;
    let waiters = lock_waiters(&waiting, &names, 3);
    eventually(
        Duration::from_secs(10),
        "every channel is subscribed on the primary of its slot",
        || async {
            names.iter().all(|name| {
                shard_channels(&cluster, cluster.primary_for(name).port())
                    .contains(&lock_channel(name))
            })
        },
    )
    .await;
    for port in cluster.primary_ports() {
        let mut con = cluster.node(port).connection();
        assert_eq!(
            subscriber_connections(&mut con),
            1,
            "one subscriber connection on the primary on {port} for {} waiters",
            waiters.len()
        );
        let classic: Vec<String> = redis::cmd("PUBSUB")
            .arg("CHANNELS")
            .query(&mut con)
            .unwrap();
        assert!(classic.is_empty(), "no classic subscription: {classic:?}");
    }
    for guard in guards {
        guard.unlock().await.unwrap();
    }
    // Woken by the sharded messages: the waiters' own re-checks come after 30 s.
    join_within(Duration::from_secs(15), "every waiter is woken", waiters).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_with_a_brace_but_no_hash_tag_are_refused_on_a_cluster() {
    let cluster = RedisCluster::spawn();
    let client = cluster_client(&cluster, Duration::from_secs(30)).await;
    for name in ["job{", "job{}", "a}b{c"] {
        let err = ReentrantLock::new(&client, name).unwrap_err();
        assert!(
            matches!(err, ferrisson::Error::InvalidArgument(_)),
            "{name}: {err}"
        );
    }
    for name in ["{job}", "{job}:x", "plain"] {
        let lock = ReentrantLock::new(&client, name).unwrap();
        lock.lock().await.unwrap().unlock().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_and_renewals_follow_a_slot_migration() {
    let cluster = RedisCluster::spawn();
    let holder = cluster_client(&cluster, Duration::from_secs(30)).await;
    let short = cluster_client(&cluster, Duration::from_millis(900)).await;
    let waiting = cluster_client(&cluster, Duration::from_secs(30)).await;
    let ports = cluster.primary_ports();
    let (from, to) = (ports[0], ports[1]);
    let tag = name_on(&cluster, from, "migrate", true);
    // The protocol's latch channel wraps the name in braces: latch names carry no hash tag.
    let latch = name_on(&cluster, from, "migrate-latch", false);
    assert!(matches!(
        CountDownLatch::new(&holder, &format!("{tag}:latch")),
        Err(ferrisson::Error::InvalidArgument(_))
    ));
    let names = KindNames::tagged(&tag, &latch);

    let renewed = ReentrantLock::new(&short, &format!("{tag}:renewed"))
        .unwrap()
        .lock()
        .await
        .unwrap();
    let held = EveryKind::hold(&holder, &names).await;
    let waiters = held.waiters(&waiting, &names);
    eventually(
        Duration::from_secs(10),
        "the waiters' channels are subscribed on the first owner",
        || async { shard_channels(&cluster, from).len() >= KindNames::KINDS },
    )
    .await;

    cluster.move_slot_of(&names.lock, to);
    cluster.move_slot_of(&names.latch, to);
    eventually(
        Duration::from_secs(20),
        "the channels are subscribed again on the new owner",
        || async { shard_channels(&cluster, to).len() >= KindNames::KINDS },
    )
    .await;
    // Renewals of the short lease go on in the new place.
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    assert!(renewed.ensure_held().is_ok(), "{:?}", renewed.loss_reason());

    held.release().await;
    // Woken by messages on the new owner (their own re-checks would come after 30 s).
    join_within(
        Duration::from_secs(15),
        "every waiter gets its lock, permit or open latch",
        waiters,
    )
    .await;
    renewed.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_and_renewals_survive_a_primary_failover() {
    let mut cluster = RedisCluster::spawn();
    let holder = cluster_client(&cluster, Duration::from_secs(30)).await;
    // A lease longer than the failover takes (the node timeout of 1 s, then an election): a
    // shorter one would really run out on the promoted replica, and be reported lost.
    let short = cluster_client(&cluster, Duration::from_secs(6)).await;
    let waiting = cluster_client(&cluster, Duration::from_secs(30)).await;
    let primary = cluster.primary_ports()[0];
    let tag = name_on(&cluster, primary, "failover", true);
    let latch = name_on(&cluster, primary, "failover-latch", false);
    let names = KindNames::tagged(&tag, &latch);

    let renewed = ReentrantLock::new(&short, &format!("{tag}:renewed"))
        .unwrap()
        .lock()
        .await
        .unwrap();
    let held = EveryKind::hold(&holder, &names).await;
    let waiters = held.waiters(&waiting, &names);
    eventually(
        Duration::from_secs(10),
        "the waiters' channels are subscribed",
        || async { shard_channels(&cluster, primary).len() >= KindNames::KINDS },
    )
    .await;
    // The latch's arming is not replica-synced (only acquisitions are): the replica must have
    // it before its primary dies, or it is lost, and its waiter is told so (`LatchLost`). A
    // write in its slot on this connection, acknowledged by a replica, follows it there.
    let mut con = cluster.node_mut(primary).connection();
    let _: () = redis::cmd("SET")
        .arg(format!("{{{latch}}}:replicated"))
        .arg(1)
        .query(&mut con)
        .unwrap();
    let acked: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(10_000)
        .query(&mut con)
        .unwrap();
    assert_eq!(acked, 1, "the replica has the latch");
    cluster.node_mut(primary).stop();
    let promoted = cluster.wait_for_failover(primary);
    assert_eq!(cluster.primary_for(&names.lock).port(), promoted);

    eventually(
        Duration::from_secs(15),
        "the waiters' channels are subscribed on the promoted replica",
        || async { shard_channels(&cluster, promoted).len() >= KindNames::KINDS },
    )
    .await;
    // The short lease was renewed on the promoted replica, past its first term (replica sync
    // made sure the replica had it before the primary died).
    tokio::time::sleep(Duration::from_millis(6_500)).await;
    assert!(renewed.ensure_held().is_ok(), "{:?}", renewed.loss_reason());
    assert!(held.lock().ensure_held().is_ok());

    held.release().await;
    join_within(
        Duration::from_secs(20),
        "every waiter gets its lock, permit or open latch after the failover",
        waiters,
    )
    .await;
    renewed.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_that_loses_a_lease_is_reported_to_the_holder() {
    let mut cluster = RedisCluster::spawn();
    // Without replica sync (on by default, which would refuse the acquisition below while the
    // replica is cut off: tests/faults/replica_sync.rs), the failover loses the lock, and the holder
    // must be told.
    let holder = connect(
        ClientConfig::cluster(cluster.urls()).without_replica_sync(),
        Duration::from_millis(1_500),
    )
    .await;
    let other = cluster_client(&cluster, Duration::from_secs(30)).await;
    let primary = cluster.primary_ports()[1];
    let replica = cluster.replica_of(primary);
    let name = name_on(&cluster, primary, "lost-on-failover", false);

    // The replica misses the acquisition: frozen while it happens, then its primary dies.
    cluster.node(replica).pause();
    // Cut the replication link while the replica is frozen: what the primary writes from now
    // on never reaches the replica's socket buffer.
    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("replica")
        .query(&mut cluster.node(primary).connection())
        .unwrap();
    let guard = ReentrantLock::fenced(&holder, &name)
        .unwrap()
        .lock()
        .await
        .unwrap();
    cluster.node_mut(primary).stop();
    cluster.node(replica).resume();
    let promoted = cluster.wait_for_failover(primary);
    assert_eq!(promoted, replica);

    let reason = tokio::time::timeout(Duration::from_secs(15), guard.lost())
        .await
        .unwrap_or_else(|_| panic!("the holder was never told its lease was lost"));
    assert!(guard.ensure_held().is_err(), "{reason:?}");
    // The lock is free on the new primary, and the next holder's token is larger.
    let next = ReentrantLock::fenced(&other, &name)
        .unwrap()
        .try_lock()
        .await
        .unwrap()
        .expect("the lock is free after the failover");
    assert!(next.token().unwrap() > guard.token().unwrap());
    assert!(matches!(
        guard.unlock().await,
        Err(ferrisson::Error::LeaseLost(_))
    ));
    next.unlock().await.unwrap();
}
