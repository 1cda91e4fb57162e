//! Fencing tokens never go backwards, even when Redis loses the counter: a restart without
//! persistence, `FLUSHALL`, a failover to a replica that missed the last increments. And the
//! counter stays Redisson's: an integer its `INCR` keeps growing.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common;

use std::time::Duration;

use common::*;
use ferrisson::{FencedLock, Lock, ReentrantLock};
use ferrisson_fair_lock::FairLock;
use ferrisson_rwlock::ReadWriteLock;

/// Takes and releases `lock` once; its token.
async fn token_of<L: Lock>(lock: &L) -> u64 {
    let guard = lock.lock().await.unwrap();
    let token = guard.token().unwrap();
    guard.unlock().await.unwrap();
    token
}

/// Takes and releases a fenced lock of every kind (names derived from `name`) `rounds` times
/// each; returns the tokens in the order they were issued. They are three counters, but every
/// token is at least the server's clock, so they grow across counters too.
async fn tokens_of_every_kind(client: &ferrisson::Client, name: &str, rounds: usize) -> Vec<u64> {
    let reentrant = ReentrantLock::fenced(client, name).unwrap();
    let fair = FairLock::fenced(client, &format!("{name}:fair")).unwrap();
    let write = ReadWriteLock::fenced(client, &format!("{name}:rw"))
        .unwrap()
        .write_lock();
    let mut tokens = Vec::new();
    for _ in 0..rounds {
        tokens.push(token_of(&reentrant).await);
        tokens.push(token_of(&fair).await);
        tokens.push(token_of(&write).await);
    }
    tokens
}

fn assert_strictly_increasing(tokens: &[u64]) {
    for pair in tokens.windows(2) {
        assert!(pair[0] < pair[1], "tokens went backwards: {tokens:?}");
    }
}

/// The counter as Redis stores it.
fn counter(con: &mut redis::Connection, name: &str) -> Option<String> {
    redis::cmd("GET")
        .arg(format!("redisson_lock_token:{{{name}}}"))
        .query(con)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_without_persistence_never_takes_tokens_back() {
    let mut server = RedisServer::spawn();
    let client = client_with_lease(&server.url(), Duration::from_secs(2)).await;
    let name = unique_name("fence-restart");
    let lock = FencedLock::new(&client, &name).unwrap();
    let mut tokens = Vec::new();
    for _ in 0..5 {
        let guard = lock.lock().await.unwrap();
        tokens.push(guard.token());
        guard.unlock().await.unwrap();
    }
    // A holder keeps its hold across the restart; Redis forgets it and the counter.
    let stale = lock.lock().await.unwrap();
    tokens.push(stale.token());
    server.restart();
    assert_eq!(counter(&mut server.connection(), &name), None);
    tokio::time::timeout(Duration::from_secs(10), stale.lost())
        .await
        .expect("the stale holder is told within a lease");
    let fresh = lock.lock().await.unwrap();
    tokens.push(fresh.token());
    assert!(
        fresh.token() > stale.token(),
        "the new holder's token {} must beat the stale holder's {}",
        fresh.token(),
        stale.token()
    );
    fresh.unlock().await.unwrap();
    drop(stale);
    assert_strictly_increasing(&tokens);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flushall_never_takes_tokens_back_for_any_kind() {
    let server = RedisServer::spawn();
    let client = client(&server.url()).await;
    let name = unique_name("fence-flush");
    let mut tokens = tokens_of_every_kind(&client, &name, 3).await;
    let _: () = redis::cmd("FLUSHALL")
        .query(&mut server.connection())
        .unwrap();
    tokens.extend(tokens_of_every_kind(&client, &name, 3).await);
    assert_strictly_increasing(&tokens);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_off_after_the_counter_was_deleted_still_issues_a_greater_token() {
    let server = RedisServer::spawn();
    let client = client(&server.url()).await;
    let name = unique_name("fence-handoff");
    let lock = ReentrantLock::fenced(&client, &name).unwrap();
    let first = lock.lock().await.unwrap();
    let before = first.token().unwrap();
    let _: () = redis::cmd("DEL")
        .arg(format!("redisson_lock_token:{{{name}}}"))
        .query(&mut server.connection())
        .unwrap();
    // A local waiter gets the lock straight from the release script (a hand-off), which issues
    // its token there.
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.lock().await })
    };
    eventually(Duration::from_secs(5), "the waiter waits", || async {
        client.waiter_stats().1 == 1
    })
    .await;
    first.unlock().await.unwrap();
    let second = waiter.await.unwrap().unwrap();
    assert!(second.token().unwrap() > before);
    second.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_to_a_replica_that_missed_increments_never_takes_tokens_back() {
    let mut primary = RedisServer::spawn();
    let replica = RedisServer::spawn();
    let name = unique_name("fence-failover");
    let mut replica_con = replica.connection();
    // The first sync at once, not after the default diskless-sync delay.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("repl-diskless-sync-delay")
        .arg(0)
        .query(&mut primary.connection())
        .unwrap();
    let _: () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(primary.port())
        .query(&mut replica_con)
        .unwrap();
    let on_primary = client(&primary.url()).await;
    let lock = FencedLock::new(&on_primary, &name).unwrap();
    let replicated = lock.lock().await.unwrap();
    let replicated_token = replicated.token();
    replicated.unlock().await.unwrap();
    // The replica has caught up with the first token (and the release after it)...
    eventually(
        Duration::from_secs(10),
        "the replica copies the counter",
        || {
            let value = counter(&mut replica_con, &name);
            let locked: bool = redis::cmd("EXISTS")
                .arg(&name)
                .query(&mut replica_con)
                .unwrap();
            async move { value == Some(replicated_token.to_string()) && !locked }
        },
    )
    .await;
    // ...and then misses every later one: cut off (promoted, as a failover would, while the old
    // primary still takes writes) before the primary hands out more.
    let _: () = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut replica_con)
        .unwrap();
    let mut last = replicated_token;
    for _ in 0..5 {
        let guard = lock.lock().await.unwrap();
        assert!(guard.token() > last);
        last = guard.token();
        guard.unlock().await.unwrap();
    }
    primary.stop();
    assert_eq!(
        counter(&mut replica_con, &name),
        Some(replicated_token.to_string()),
        "the promoted replica must have missed the later tokens for this test to mean anything"
    );
    let on_replica = client(&replica.url()).await;
    let guard = FencedLock::new(&on_replica, &name)
        .unwrap()
        .lock()
        .await
        .unwrap();
    assert!(
        guard.token() > last,
        "token {} after the failover must beat {last}, the last one the old primary issued",
        guard.token()
    );
    guard.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redissons_incr_on_the_counter_keeps_it_growing_both_ways() {
    let server = RedisServer::spawn();
    let client = client(&server.url()).await;
    let name = unique_name("fence-incr");
    let lock = FencedLock::new(&client, &name).unwrap();
    let ours = lock.lock().await.unwrap();
    let first = ours.token();
    ours.unlock().await.unwrap();
    let mut con = server.connection();
    // The counter is an integer string (what Redisson's RFencedLock INCRs)...
    assert_eq!(counter(&mut con, &name), Some(first.to_string()));
    // ...and Redisson's INCR (its fenced acquire) continues from it.
    let theirs: u64 = redis::cmd("INCR")
        .arg(format!("redisson_lock_token:{{{name}}}"))
        .query(&mut con)
        .unwrap();
    assert_eq!(theirs, first + 1);
    let ours = lock.lock().await.unwrap();
    assert!(ours.token() > theirs);
    ours.unlock().await.unwrap();
}
