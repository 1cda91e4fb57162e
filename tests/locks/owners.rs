//! Futures joined in one task never share a hold: a handle with no owner of its own takes
//! every hold under a fresh owner. Re-entry is explicit, through a bound owner.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common;

use ferrisson::Lock;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use common::{TestRedis, client, unique_name};
use ferrisson::core::HoldGuard;
use ferrisson::{Error, ReentrantLock};
use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;

/// Runs `n` acquire-hold-release calls in the calling task, joined, and returns the most
/// that held at once.
async fn most_at_once<F>(n: usize, acquire: F) -> u32
where
    F: Fn() -> BoxFuture<'static, Result<HoldGuard, Error>>,
{
    let holding = Arc::new(AtomicU32::new(0));
    let most = Arc::new(AtomicU32::new(0));
    let mut calls = FuturesUnordered::new();
    for _ in 0..n {
        let (holding, most) = (holding.clone(), most.clone());
        let acquired = acquire();
        calls.push(async move {
            let guard = acquired.await.unwrap();
            let now = holding.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            // Give the other futures of this task every chance to get in.
            for _ in 0..5 {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            holding.fetch_sub(1, Ordering::SeqCst);
            guard.unlock().await.unwrap();
        });
    }
    while calls.next().await.is_some() {}
    most.load(Ordering::SeqCst)
}

#[tokio::test]
async fn futures_joined_in_one_task_exclude_each_other_for_every_lock_kind() {
    let redis = TestRedis::any();
    let client = client(&redis.url()).await;

    let lock = ReentrantLock::new(&client, &unique_name("own-lock")).unwrap();
    let most = most_at_once(8, || {
        let lock = lock.clone();
        Box::pin(async move { lock.lock().await })
    })
    .await;
    assert_eq!(most, 1, "reentrant lock: one holder at a time");

    let fair = ferrisson_fair_lock::FairLock::new(&client, &unique_name("own-fair")).unwrap();
    let most = most_at_once(6, || {
        let fair = fair.clone();
        Box::pin(async move { fair.lock().await })
    })
    .await;
    assert_eq!(most, 1, "fair lock: one holder at a time");

    let rw = ferrisson_rwlock::ReadWriteLock::new(&client, &unique_name("own-rw")).unwrap();
    let most = most_at_once(6, || {
        let rw = rw.clone();
        Box::pin(async move { rw.write_lock().lock().await })
    })
    .await;
    assert_eq!(most, 1, "write lock: one writer at a time");
    assert!(!lock.is_locked().await.unwrap() && !fair.is_locked().await.unwrap());
}

#[tokio::test]
async fn join_of_two_acquires_in_one_task_runs_them_one_after_the_other() {
    let redis = TestRedis::any();
    let client = client(&redis.url()).await;
    let lock = ReentrantLock::new(&client, &unique_name("own-join")).unwrap();
    let inside = AtomicU32::new(0);
    let section = || async {
        let guard = lock.lock().await.unwrap();
        assert_eq!(
            inside.fetch_add(1, Ordering::SeqCst),
            0,
            "two inside at once"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
        inside.fetch_sub(1, Ordering::SeqCst);
        let owner = guard.owner().clone();
        guard.unlock().await.unwrap();
        owner
    };
    let (first, second) = tokio::join!(section(), section());
    assert_ne!(first, second, "each acquisition has an owner of its own");
    assert!(!lock.is_locked().await.unwrap());
}

#[tokio::test]
async fn a_bound_owner_re_enters_and_counts_its_holds() {
    let redis = TestRedis::any();
    let client = client(&redis.url()).await;
    let name = unique_name("own-reenter");
    let lock = ReentrantLock::new(&client, &name).unwrap();
    assert_eq!(lock.owner(), None);
    let outer = lock.lock().await.unwrap();
    // Re-entry through the guard's owner, from another task too.
    let mine = lock.owned_by(outer.owner().clone());
    let inner = tokio::spawn({
        let mine = mine.clone();
        async move { mine.lock().await }
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!(mine.hold_count().await.unwrap(), 2);
    assert_eq!(inner.owner(), outer.owner());
    // The unbound handle has no owner to ask about: a clear error, not a silent 0.
    assert!(matches!(
        lock.hold_count().await,
        Err(Error::InvalidArgument(_))
    ));
    // Nor does an unbound acquisition slip in beside the bound owner's holds.
    assert!(lock.try_lock().await.unwrap().is_none());
    inner.unlock().await.unwrap();
    assert_eq!(mine.hold_count().await.unwrap(), 1);
    outer.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
}
