//! The lean mutex: what is its own beside the generic lock suite (`conformance.rs`): no
//! re-entry, the standard Redlock layout shared with other clients, keys of other types, the
//! watchdog on its string.
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use std::time::Duration;

use common::{TestRedis, client, client_with_lease, eventually, unique_name};
use ferrisson::{AcquireOptions, Error, Lock, Mutex, SyncObject};
use redis::Commands;

const SOON: Duration = Duration::from_secs(10);

/// rslock's, redsync's and redis-py's release: delete if the value is the caller's token.
const PEER_RELEASE: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_holding_it_is_refused_instead_of_waiting_on_itself() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    let mutex = Mutex::new(&a, &unique_name("mutex-reentry")).unwrap();
    let bound = mutex.owned_by(a.new_owner());
    let guard = bound.lock().await.unwrap();
    for err in [
        bound.lock().await.unwrap_err(),
        bound.try_lock().await.unwrap_err(),
    ] {
        assert!(matches!(err, Error::WouldDeadlock(_)), "{err:?}");
    }
    assert_eq!(bound.hold_count().await.unwrap(), 1);
    assert!(
        guard.loss_reason().is_none(),
        "the refusal left the hold alone"
    );
    guard.unlock().await.unwrap();
    assert!(!mutex.is_locked().await.unwrap());
}

/// The key holds the holder's token with the lease as its TTL: another Redlock client's
/// `SET NX PX` fails while it is held, and this client waits for a peer's hold (whose release
/// publishes nothing) until the peer's lease ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn it_shares_the_standard_layout_with_other_redlock_clients() {
    let redis = TestRedis::any();
    // A short lease: the watchdog renews (and finds a hold gone) soon.
    let a = client_with_lease(&redis.url(), Duration::from_millis(900)).await;
    let name = unique_name("mutex-layout");
    let mutex = Mutex::new(&a, &name).unwrap();
    let mut con = redis.connection();

    let guard = mutex
        .lock_with(AcquireOptions::new().with_lease(Duration::from_secs(20)))
        .await
        .unwrap();
    let token: String = con.get(&name).unwrap();
    assert_eq!(token, guard.owner().as_str());
    let ttl: i64 = con.pttl(&name).unwrap();
    assert!(ttl > 0 && ttl <= 20_000, "{ttl}");
    let peer: Option<String> = redis::cmd("SET")
        .arg(&name)
        .arg("peer-token")
        .arg("NX")
        .arg("PX")
        .arg(5_000)
        .query(&mut con)
        .unwrap();
    assert_eq!(peer, None, "a peer took a held mutex");
    // A peer's release with another token leaves it alone; ours frees it.
    let deleted: i64 = redis::Script::new(PEER_RELEASE)
        .key(&name)
        .arg("peer-token")
        .invoke(&mut con)
        .unwrap();
    assert_eq!(deleted, 0);
    guard.unlock().await.unwrap();
    let exists: bool = con.exists(&name).unwrap();
    assert!(!exists, "the release left the key");

    // A peer's hold: refused at once, waited for until its lease ends.
    let _: () = redis::cmd("SET")
        .arg(&name)
        .arg("peer-token")
        .arg("PX")
        .arg(300)
        .query(&mut con)
        .unwrap();
    assert!(mutex.try_lock().await.unwrap().is_none());
    assert!(mutex.is_locked().await.unwrap());
    let ours = mutex
        .try_lock_with(AcquireOptions::new().with_wait(SOON))
        .await
        .unwrap()
        .expect("taken once the peer's lease ended");
    // And a peer's release with our token frees it for everyone (the layout is shared).
    let deleted: i64 = redis::Script::new(PEER_RELEASE)
        .key(&name)
        .arg(ours.owner().as_str())
        .invoke(&mut con)
        .unwrap();
    assert_eq!(deleted, 1);
    assert_eq!(
        tokio::time::timeout(SOON, ours.lost()).await.unwrap(),
        ferrisson::LossReason::NotHeld,
        "the holder is told at its next renewal"
    );
}

/// A string is a mutex held by some token (it may be another client's); any other type is
/// someone else's data: refused, and left as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hash_at_its_name_is_refused_and_a_string_is_a_foreign_hold() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    let mut con = redis.connection();

    let name = unique_name("mutex-hash");
    let _: () = con.hset(&name, "f", "x").unwrap();
    let mutex = Mutex::new(&a, &name).unwrap();
    let waiting = AcquireOptions::new().with_wait(Duration::from_millis(200));
    for err in [
        mutex.try_lock().await.unwrap_err(),
        mutex.try_lock_with(waiting).await.unwrap_err(),
        mutex.force_unlock().await.unwrap_err(),
        mutex.is_locked().await.unwrap_err(),
        mutex.delete().await.unwrap_err(),
        mutex.expire(Duration::from_secs(5)).await.unwrap_err(),
    ] {
        assert!(matches!(err, Error::WrongType { .. }), "{err:?}");
    }
    let hash: std::collections::HashMap<String, String> = con.hgetall(&name).unwrap();
    assert_eq!(hash.len(), 1, "the user's hash changed: {hash:?}");
    let ttl: i64 = con.pttl(&name).unwrap();
    assert_eq!(ttl, -1, "the user's hash got an expiry");

    let name = unique_name("mutex-string");
    let _: () = con.set(&name, "someone").unwrap();
    let mutex = Mutex::new(&a, &name).unwrap();
    assert!(mutex.try_lock().await.unwrap().is_none());
    assert!(mutex.is_locked().await.unwrap());
    assert!(mutex.force_unlock().await.unwrap());
    mutex
        .try_lock()
        .await
        .unwrap()
        .expect("free")
        .unlock()
        .await
        .unwrap();
}

/// Kept by the watchdog, the hold outlives many leases; released, the key is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_keeps_its_string_alive() {
    let redis = TestRedis::any();
    let lease = Duration::from_millis(600);
    let a = client_with_lease(&redis.url(), lease).await;
    let name = unique_name("mutex-watchdog");
    let mutex = Mutex::new(&a, &name).unwrap();
    let guard = mutex.lock().await.unwrap();
    let mut con = redis.connection();
    let started = tokio::time::Instant::now();
    eventually(SOON, "three leases passed with the hold standing", || {
        let exists: bool = con.exists(&name).unwrap();
        assert!(exists, "the hold ended while kept");
        std::future::ready(started.elapsed() > lease * 3)
    })
    .await;
    assert!(guard.loss_reason().is_none());
    guard.unlock().await.unwrap();
    assert!(!mutex.is_locked().await.unwrap());
}
