//! Retry records stay bounded (#35): under load, a client keeps at most one retry key per
//! object (the semaphores' record, the locks' unlock latch of the client), never a fresh key
//! per call, and every such key carries a TTL.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::*;
use ferrisson::{Client, ExpirableSemaphore, FairLock, Lock, ReentrantLock, Semaphore};
use futures::future::BoxFuture;

const CLIENTS: usize = 2;
const OBJECTS: usize = 2;
const TASKS: usize = 8;
const CYCLES: usize = 120;

/// Whether `key` is one of the retry keys of an object (a latch or a record, ours or the
/// Redisson layout's), rather than the object's own state.
fn is_retry_key(key: &str) -> bool {
    key.starts_with("redisson_unlock_latch:")
        || key.contains(":record:")
        || key.contains(":undone:")
        || key.contains(":acquire:")
}

/// Every retry key of the objects whose names start with `prefix`, with its PTTL, by the
/// object's name.
async fn retry_keys(
    con: &mut redis::aio::MultiplexedConnection,
    prefix: &str,
) -> HashMap<String, Vec<(String, i64)>> {
    let mut cursor = 0u64;
    let mut found: HashMap<String, Vec<(String, i64)>> = HashMap::new();
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("*{prefix}*"))
            .arg("COUNT")
            .arg(1000)
            .query_async(con)
            .await
            .unwrap();
        for key in keys.into_iter().filter(|k| is_retry_key(k)) {
            let ttl: i64 = redis::cmd("PTTL").arg(&key).query_async(con).await.unwrap();
            if ttl == -2 {
                continue; // gone meanwhile
            }
            // The object's name: the hash tag's content.
            let object = key
                .split_once('{')
                .and_then(|(_, rest)| rest.split_once('}'))
                .map(|(name, _)| name.to_owned())
                .unwrap_or_else(|| panic!("retry key without a hash tag: {key}"));
            found.entry(object).or_default().push((key, ttl));
        }
        cursor = next;
        if cursor == 0 {
            return found;
        }
    }
}

/// Runs `cycle` (one acquire + release of the object named by its second argument) over
/// `CLIENTS` clients × `OBJECTS` objects × `TASKS` tasks, `CYCLES` times each, while counting
/// the retry keys; panics when an object ever has more than one per client, or a retry key
/// has no TTL.
async fn bounded_under_load(
    kind: &str,
    setup: impl Fn(Client, String) -> BoxFuture<'static, ()>,
    cycle: impl Fn(Client, String) -> BoxFuture<'static, ()> + Send + Sync + 'static,
) {
    let redis = TestRedis::any();
    let url = redis.url();
    let prefix = unique_name(&format!("records-{kind}"));
    let names: Vec<String> = (0..OBJECTS).map(|o| format!("{prefix}:{o}")).collect();
    let clients: Vec<Client> = futures::future::join_all((0..CLIENTS).map(|_| client(&url))).await;
    for name in &names {
        setup(clients[0].clone(), name.clone()).await;
    }
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (done, prefix, url) = (done.clone(), prefix.clone(), url.clone());
        tokio::spawn(async move {
            let mut con = redis::Client::open(url.as_str())
                .unwrap()
                .get_multiplexed_async_connection()
                .await
                .unwrap();
            let (mut most, mut samples) = (0usize, 0u32);
            while !done.load(Ordering::Acquire) || samples == 0 {
                for (object, keys) in retry_keys(&mut con, &prefix).await {
                    most = most.max(keys.len());
                    assert!(
                        keys.len() <= CLIENTS,
                        "{object}: {} retry keys alive for {CLIENTS} clients: {keys:?}",
                        keys.len()
                    );
                    for (key, ttl) in &keys {
                        assert!(*ttl > 0, "{key} has no TTL ({ttl})");
                    }
                }
                samples += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            (most, samples)
        })
    };
    let cycle = Arc::new(cycle);
    let mut tasks = Vec::new();
    for c in &clients {
        for name in &names {
            for _ in 0..TASKS {
                let (c, name, cycle) = (c.clone(), name.clone(), cycle.clone());
                tasks.push(tokio::spawn(async move {
                    for _ in 0..CYCLES {
                        cycle(c.clone(), name.clone()).await;
                    }
                }));
            }
        }
    }
    for task in tasks {
        task.await.unwrap();
    }
    done.store(true, Ordering::Release);
    let (most, samples) = sampler.await.unwrap();
    assert!(samples > 0);
    // The calls did leave records: the bound is met by reuse, not by writing none.
    assert!(most >= 1, "{kind}: no retry key seen in {samples} samples");
    let mut con = redis::Client::open(url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let left = retry_keys(&mut con, &prefix).await;
    let total: usize = left.values().map(Vec::len).sum();
    assert!(
        total <= CLIENTS * OBJECTS,
        "{kind}: {total} retry keys left for {CLIENTS} clients × {OBJECTS} objects: {left:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_records_stay_one_per_client_and_object() {
    bounded_under_load(
        "semaphore",
        |c, name| {
            Box::pin(async move {
                assert!(
                    Semaphore::new(&c, &name)
                        .unwrap()
                        .try_set_permits(3)
                        .await
                        .unwrap()
                );
            })
        },
        |c, name| {
            Box::pin(async move {
                let semaphore = Semaphore::new(&c, &name).unwrap();
                semaphore.acquire().await.unwrap().release().await.unwrap();
            })
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expirable_semaphore_records_stay_one_per_client_and_object() {
    bounded_under_load(
        "expirable",
        |c, name| {
            Box::pin(async move {
                let semaphore = ExpirableSemaphore::new(&c, &name).unwrap();
                assert!(semaphore.try_set_permits(3).await.unwrap());
            })
        },
        |c, name| {
            Box::pin(async move {
                let semaphore = ExpirableSemaphore::new(&c, &name).unwrap();
                semaphore.acquire().await.unwrap().release().await.unwrap();
            })
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_lock_latches_stay_one_per_client_and_lock() {
    bounded_under_load(
        "fair",
        |_, _| Box::pin(async {}),
        |c, name| {
            Box::pin(async move {
                let lock = FairLock::new(&c, &name).unwrap();
                lock.lock().await.unwrap().unlock().await.unwrap();
            })
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentrant_lock_latches_stay_one_per_client_and_lock() {
    bounded_under_load(
        "reentrant",
        |_, _| Box::pin(async {}),
        |c, name| {
            Box::pin(async move {
                let lock = ReentrantLock::new(&c, &name).unwrap();
                lock.lock().await.unwrap().unlock().await.unwrap();
            })
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_write_lock_records_stay_one_per_client_and_lock() {
    let turn = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    bounded_under_load(
        "rwlock",
        |_, _| Box::pin(async {}),
        move |c, name| {
            // Readers and writers in turn, so that read releases overlap.
            let write = turn.fetch_add(1, Ordering::Relaxed).is_multiple_of(4);
            Box::pin(async move {
                let lock = ferrisson::ReadWriteLock::new(&c, &name).unwrap();
                if write {
                    let guard = lock.write_lock().lock().await.unwrap();
                    guard.unlock().await.unwrap();
                } else {
                    let guard = lock.read_lock().lock().await.unwrap();
                    guard.unlock().await.unwrap();
                }
            })
        },
    )
    .await;
}
