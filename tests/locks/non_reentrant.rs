//! The non-reentrant locks (Redisson's `RNonReentrantLock` and `RNonReentrantFairLock`): re-entry
//! is a typed error naming the lock, never a wait for itself, and takes nothing; everything else
//! is their layout's (the conformance suite runs them too). The Redisson side of the interop
//! checks is played by the test, writing what Redisson writes.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common;

use std::time::Duration;

use common::{TestRedis, client, eventually, unique_name};
use ferrisson::{
    AcquireOptions, Client, Error, Lock, NonReentrantFairLock, NonReentrantLock, Owner,
};
use redis::Commands;

const SOON: Duration = Duration::from_secs(10);

/// A non-reentrant kind under test.
trait Kind {
    type L: Lock + Clone + Send + Sync + 'static;
    const NAME: &'static str;
    fn fenced(client: &Client, name: &str) -> Self::L;
    fn owned_by(lock: &Self::L, owner: Owner) -> Self::L;
    /// The release channel a Redisson holder's unlock publishes on, for a waiter `waiter`.
    fn channel(name: &str, waiter: &str) -> String;
}

struct Plain;
impl Kind for Plain {
    type L = NonReentrantLock;
    const NAME: &'static str = "non-reentrant lock";
    fn fenced(client: &Client, name: &str) -> NonReentrantLock {
        NonReentrantLock::fenced(client, name).unwrap()
    }
    fn owned_by(lock: &NonReentrantLock, owner: Owner) -> NonReentrantLock {
        lock.owned_by(owner)
    }
    fn channel(name: &str, _waiter: &str) -> String {
        format!("redisson_lock__channel:{{{name}}}")
    }
}

struct Fair;
impl Kind for Fair {
    type L = NonReentrantFairLock;
    const NAME: &'static str = "non-reentrant fair lock";
    fn fenced(client: &Client, name: &str) -> NonReentrantFairLock {
        NonReentrantFairLock::fenced(client, name).unwrap()
    }
    fn owned_by(lock: &NonReentrantFairLock, owner: Owner) -> NonReentrantFairLock {
        lock.owned_by(owner)
    }
    fn channel(name: &str, waiter: &str) -> String {
        format!("redisson_lock__channel:{{{name}}}:{waiter}")
    }
}

/// A bound owner's second acquisition, with or without a wait, is `WouldDeadlock` naming the
/// lock and the owner, at once; it takes nothing and queues nothing. Another owner waits, and
/// the release hands the lock over with a greater token.
async fn re_entry_is_refused<K: Kind>() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    let name = unique_name("non-reentrant");
    let lock = K::fenced(&a, &name);
    let owner = a.new_owner();
    let bound = K::owned_by(&lock, owner.clone());
    let guard = bound.lock().await.unwrap();
    let token = guard.token().unwrap();

    for wait in [None, Some(Duration::from_secs(30))] {
        let options = wait.map_or_else(AcquireOptions::new, |w| AcquireOptions::new().with_wait(w));
        let again = tokio::time::timeout(SOON, bound.try_lock_with(options))
            .await
            .unwrap_or_else(|_| panic!("{}: re-entry waited for itself", K::NAME));
        match again {
            Err(Error::WouldDeadlock(message)) => {
                assert!(message.contains(&name), "{}: {message}", K::NAME);
                assert!(message.contains(owner.as_str()), "{}: {message}", K::NAME);
            }
            other => panic!("{}: re-entry gave {other:?}", K::NAME),
        }
    }
    let again = tokio::time::timeout(SOON, bound.lock()).await.unwrap();
    assert!(
        matches!(again, Err(Error::WouldDeadlock(_))),
        "{}: {again:?}",
        K::NAME
    );
    assert_eq!(
        bound.hold_count().await.unwrap(),
        1,
        "{}: the refusals took nothing",
        K::NAME
    );
    let mut con = redis.connection();
    let queued: i64 = con.llen(format!("redisson_lock_queue:{{{name}}}")).unwrap();
    assert_eq!(queued, 0, "{}: a refusal queues nothing", K::NAME);
    assert!(guard.ensure_held().is_ok(), "{}", K::NAME);

    let waiter = tokio::spawn({
        let lock = lock.clone();
        async move { lock.lock().await }
    });
    eventually(SOON, "the other owner waits", || async {
        a.waiter_stats().1 == 1
    })
    .await;
    guard.unlock().await.unwrap();
    let next = tokio::time::timeout(SOON, waiter)
        .await
        .unwrap_or_else(|_| panic!("{}: the waiter was not served", K::NAME))
        .unwrap()
        .unwrap();
    assert!(
        next.token().unwrap() > token,
        "{}: fencing tokens only grow",
        K::NAME
    );
    // Once released, the bound owner takes it again (after the other): a refusal is only
    // while it holds.
    let later = tokio::spawn({
        let bound = bound.clone();
        async move { bound.lock().await }
    });
    next.unlock().await.unwrap();
    let later = tokio::time::timeout(SOON, later)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    later.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap(), "{}", K::NAME);
}

/// A Redisson holder (its hash field "<uuid>:<thread id>" = 1) excludes ours, and its unlock
/// (delete, publish 0 on the channel its waiters listen on) wakes ours; Redisson reads our hold
/// as its own kind writes one (count 1), and its acquire sees the lock held.
async fn redisson_holders_interoperate<K: Kind>() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    let name = unique_name("non-reentrant-redisson");
    let mut con = redis.connection();
    let _: () = con
        .hset(&name, "6c6d4bcb-7e0b-4d0e-9f6b-0f6b5d6a0c1e:57", 1)
        .unwrap();
    let _: () = con.pexpire(&name, 60_000).unwrap();
    let lock = K::fenced(&a, &name);
    assert!(lock.try_lock().await.unwrap().is_none(), "{}", K::NAME);
    let owner = a.new_owner();
    let waiter = tokio::spawn({
        let lock = K::owned_by(&lock, owner.clone());
        async move { lock.lock().await.unwrap() }
    });
    eventually(SOON, "ours waits", || async { a.waiter_stats().1 == 1 }).await;
    let _: () = con.del(&name).unwrap();
    let _: () = con.publish(K::channel(&name, owner.as_str()), 0).unwrap();
    let guard = tokio::time::timeout(SOON, waiter)
        .await
        .unwrap_or_else(|_| panic!("{}: not woken by Redisson's release", K::NAME))
        .unwrap();
    let fields: std::collections::HashMap<String, u32> = con.hgetall(&name).unwrap();
    assert_eq!(fields.len(), 1, "{}: {fields:?}", K::NAME);
    assert_eq!(
        fields.get(owner.as_str()),
        Some(&1),
        "{}: {fields:?}",
        K::NAME
    );
    // Redisson's non-reentrant acquire for another thread: the key exists and the thread's
    // field does not, so it reads the lock's TTL and waits.
    let (exists, mine): (bool, bool) = redis::pipe()
        .exists(&name)
        .hexists(&name, "6c6d4bcb-7e0b-4d0e-9f6b-0f6b5d6a0c1e:58")
        .query(&mut con)
        .unwrap();
    assert!(exists && !mine, "{}", K::NAME);
    guard.unlock().await.unwrap();
    let left: bool = con.exists(&name).unwrap();
    assert!(
        !left,
        "{}: the release deletes the hash as Redisson's does",
        K::NAME
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_reentrant_lock_refuses_re_entry() {
    re_entry_is_refused::<Plain>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_reentrant_fair_lock_refuses_re_entry() {
    re_entry_is_refused::<Fair>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_reentrant_lock_shares_holders_with_redisson() {
    redisson_holders_interoperate::<Plain>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_reentrant_fair_lock_shares_holders_with_redisson() {
    redisson_holders_interoperate::<Fair>().await;
}
