//! Every synchronizer on a local Redis Cluster (3 primaries, 3 replicas): names spread over all
//! primaries, exclusion and permit limits across four clients, waiters woken by messages that
//! cross the cluster, and watchdog renewals of holds in many slots at once.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::every_kind::{lock_all, lock_waiters};
use common::*;
use ferrisson::{Client, ClientConfig, Lock, ReentrantLock};
use ferrisson_expirable_semaphore::ExpirableSemaphore;
use ferrisson_fair_lock::FairLock;
use ferrisson_latch::CountDownLatch;
use ferrisson_rwlock::ReadWriteLock;
use ferrisson_semaphore::Semaphore;
use ferrisson_testkit::RedisCluster;

async fn cluster_client(cluster: &RedisCluster, lease: Duration) -> Client {
    Client::with_config(ClientConfig::cluster(cluster.urls()).with_lease(lease))
        .await
        .unwrap_or_else(|e| panic!("connecting to the cluster: {e}"))
}

/// `n` names (a multiple of 3) whose keys land evenly on the three primaries.
fn names_on_every_primary(cluster: &RedisCluster, prefix: &str, n: usize) -> Vec<String> {
    let mut per_primary: std::collections::BTreeMap<u16, Vec<String>> = cluster
        .primary_ports()
        .into_iter()
        .map(|port| (port, Vec::new()))
        .collect();
    assert_eq!(per_primary.len(), 3, "three primaries");
    let mut i = 0;
    while per_primary.values().any(|names| names.len() < n / 3) {
        let name = unique_name(&format!("{prefix}-{i}"));
        i += 1;
        let names = per_primary
            .get_mut(&cluster.primary_for(&name).port())
            .unwrap();
        if names.len() < n / 3 {
            names.push(name);
        }
    }
    per_primary.into_values().flatten().collect()
}

/// Runs `rounds` critical sections of `work` on each of `tasks` tasks (spread over `clients`),
/// returning the most ever inside at once.
async fn most_inside<F, Fut>(clients: &[Client], tasks: usize, rounds: usize, work: F) -> usize
where
    F: Fn(Client) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = Box<dyn FnOnce() + Send>> + Send,
{
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::new();
    for t in 0..tasks {
        let client = clients[t % clients.len()].clone();
        let (inside, most, work) = (inside.clone(), most.clone(), work.clone());
        handles.push(tokio::spawn(async move {
            for _ in 0..rounds {
                let release = work(client.clone()).await;
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(2)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                release();
            }
        }));
    }
    join_within(Duration::from_secs(60), "every task finishes", handles).await;
    most.load(Ordering::SeqCst)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_lock_kind_excludes_across_clients_on_every_primary() {
    let cluster = RedisCluster::spawn();
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(cluster_client(&cluster, Duration::from_secs(30)).await);
    }
    for name in names_on_every_primary(&cluster, "cluster-lock", 6) {
        for kind in ["reentrant", "fair", "write"] {
            let name = format!("{name}-{kind}");
            let most = most_inside(&clients, 8, 5, move |client| {
                let name = name.clone();
                async move {
                    let guard = match kind {
                        "reentrant" => ReentrantLock::fenced(&client, &name).unwrap().lock().await,
                        "fair" => FairLock::fenced(&client, &name).unwrap().lock().await,
                        _ => {
                            ReadWriteLock::fenced(&client, &name)
                                .unwrap()
                                .write_lock()
                                .lock()
                                .await
                        }
                    }
                    .unwrap();
                    assert!(guard.token().unwrap() > 0);
                    Box::new(move || drop(guard)) as Box<dyn FnOnce() + Send>
                }
            })
            .await;
            assert_eq!(most, 1, "{kind}: never two holders");
        }
    }
    // Every script reached every primary with `SCRIPT LOAD` before its first call there.
    for port in cluster.primary_ports() {
        let mut con = cluster.node(port).connection();
        let info: String = redis::cmd("INFO")
            .arg("errorstats")
            .query(&mut con)
            .unwrap();
        assert!(
            !info.contains("errorstat_NOSCRIPT"),
            "primary {port} answered NOSCRIPT: {info}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphores_keep_their_limit_and_latches_open_across_clients() {
    let cluster = RedisCluster::spawn();
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(cluster_client(&cluster, Duration::from_secs(30)).await);
    }
    for name in names_on_every_primary(&cluster, "cluster-permits", 6) {
        let plain = name.clone();
        let most = most_inside(&clients, 8, 5, move |client| {
            let name = plain.clone();
            async move {
                let semaphore = Semaphore::new(&client, &name)
                    .unwrap()
                    .with_limit(2)
                    .unwrap();
                let permits = semaphore.acquire().await.unwrap();
                Box::new(move || drop(permits)) as Box<dyn FnOnce() + Send>
            }
        })
        .await;
        assert!(most <= 2, "semaphore: {most} holders at once");
        let expirable = format!("{name}-x");
        let most = most_inside(&clients, 8, 5, move |client| {
            let name = expirable.clone();
            async move {
                let semaphore = ExpirableSemaphore::new(&client, &name)
                    .unwrap()
                    .with_limit(2)
                    .unwrap();
                let permit = semaphore.acquire().await.unwrap();
                Box::new(move || drop(permit)) as Box<dyn FnOnce() + Send>
            }
        })
        .await;
        assert!(most <= 2, "expirable semaphore: {most} holders at once");

        // A latch: waiters on one client, count-downs from the others.
        let latch_name = format!("{name}-latch");
        let latch = CountDownLatch::new(&clients[0], &latch_name).unwrap();
        assert!(latch.try_set_count(3).await.unwrap());
        let waiter = {
            let latch = latch.clone();
            tokio::spawn(async move { latch.wait_for(Duration::from_secs(20)).await })
        };
        for (i, client) in clients[1..].iter().enumerate() {
            let latch = CountDownLatch::new(client, &latch_name).unwrap();
            assert!(
                latch
                    .count_down_once(&format!("w{i}"))
                    .await
                    .unwrap()
                    .counted()
            );
        }
        assert!(
            waiter.await.unwrap().unwrap(),
            "the latch opened for its waiter"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_are_woken_by_releases_on_other_primaries_and_holds_in_many_slots_are_renewed() {
    let cluster = RedisCluster::spawn();
    let holder = cluster_client(&cluster, Duration::from_millis(900)).await;
    let other = cluster_client(&cluster, Duration::from_secs(30)).await;
    let names = names_on_every_primary(&cluster, "cluster-renew", 12);
    // Holds in many slots, kept by the watchdog past several leases: its batches go per slot.
    let guards = lock_all(&holder, &names).await;
    // A waiter per name on the other client, woken by each release's message.
    let waiters = lock_waiters(&other, &names, 1);
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    for guard in &guards {
        assert!(guard.ensure_held().is_ok(), "{guard:?} was not renewed");
    }
    let started = tokio::time::Instant::now();
    for guard in guards {
        guard.unlock().await.unwrap();
    }
    join_within(Duration::from_secs(10), "every waiter is woken", waiters).await;
    // Woken by the messages, not by the waiters' lease-long re-checks (30 s).
    assert!(started.elapsed() < Duration::from_secs(10));
    for name in &names {
        assert!(
            !ReentrantLock::new(&other, name)
                .unwrap()
                .is_locked()
                .await
                .unwrap()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn classic_pubsub_on_a_cluster_when_sharded_is_off() {
    let cluster = RedisCluster::spawn();
    let config = |lease| {
        ClientConfig::cluster(cluster.urls())
            .with_lease(lease)
            .with_sharded_subscription(ferrisson::ShardedSubscription::Off)
    };
    let holder = Client::with_config(config(Duration::from_secs(30)))
        .await
        .unwrap();
    let waiting = Client::with_config(config(Duration::from_secs(30)))
        .await
        .unwrap();
    assert_eq!(
        waiting.config().publish_command(),
        ferrisson::PublishCommand::Publish
    );
    let names = names_on_every_primary(&cluster, "classic", 6);
    let guards = lock_all(&holder, &names).await;
    let waiters = lock_waiters(&waiting, &names, 1);
    eventually(Duration::from_secs(10), "classic subscriptions", || async {
        cluster.primary_ports().iter().any(|port| {
            let channels: Vec<String> = redis::cmd("PUBSUB")
                .arg("CHANNELS")
                .query(&mut cluster.node(*port).connection())
                .unwrap();
            channels.len() >= names.len()
        })
    })
    .await;
    for guard in guards {
        guard.unlock().await.unwrap();
    }
    // Woken by messages the cluster relays to the subscriber's node (re-checks: 30 s).
    join_within(Duration::from_secs(15), "every waiter is woken", waiters).await;
}

/// A faster multi-lock's group is one hash, so its values live in one slot by construction:
/// groups on every primary exclude across clients, their values are renewed past several
/// leases (the watchdog's batches per slot), and a waiter of another client gets a value once
/// it is released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faster_multilock_groups_on_every_primary() {
    use ferrisson::FasterMultiLock;
    let cluster = RedisCluster::spawn();
    let holder = cluster_client(&cluster, Duration::from_millis(900)).await;
    let other = cluster_client(&cluster, Duration::from_secs(30)).await;
    let groups = names_on_every_primary(&cluster, "cluster-fml", 3);
    let items = ["item-1", "item-2", "item-3"];
    let mut guards = Vec::new();
    for group in &groups {
        let lock = FasterMultiLock::new(&holder, group, items).unwrap();
        guards.push(lock.lock().await.unwrap());
    }
    let waiters: Vec<_> = groups
        .iter()
        .map(|group| {
            let lock = FasterMultiLock::new(&other, group, ["item-2"]).unwrap();
            tokio::spawn(async move {
                let waiting = ferrisson::AcquireOptions::new().with_wait(Duration::from_secs(20));
                lock.try_lock_with(waiting)
                    .await
                    .unwrap()
                    .expect("woken")
                    .unlock()
                    .await
                    .unwrap();
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    for guard in &guards {
        assert!(guard.ensure_held().is_ok(), "{guard:?} was not renewed");
    }
    for guard in guards {
        guard.unlock().await.unwrap();
    }
    join_within(Duration::from_secs(10), "every waiter is woken", waiters).await;
}

/// Deadlock detection on a cluster: the client records and the two locks live on different
/// primaries; two clients each hold one lock and wait for the other, and exactly one gives
/// way with `Error::Deadlock` while the other goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadlock_across_primaries_is_found() {
    let cluster = RedisCluster::spawn();
    let mut clients = Vec::new();
    for _ in 0..2 {
        let config = ClientConfig::cluster(cluster.urls())
            .with_deadlock_detection(Duration::from_millis(100));
        clients.push(Client::with_config(config).await.unwrap());
    }
    let names = names_on_every_primary(&cluster, "cluster-deadlock", 3);
    let (a, b) = (names[0].clone(), names[1].clone());
    let outcomes = crate::waits::crossed(
        (&clients[0], &clients[1]),
        move |c| ReentrantLock::new(c, &a).unwrap(),
        move |c| FairLock::new(c, &b).unwrap(),
        Duration::from_secs(30),
    )
    .await;
    crate::waits::one_gave_way(&outcomes);
}
