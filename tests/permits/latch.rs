//! The countdown latch against a real Redis.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common;

use ferrisson::SyncObject;
use std::time::Duration;

use common::*;
use ferrisson::Error;
use ferrisson_latch::{CountDown, CountDownLatch};
use redis::Commands;
use tokio::time::Instant;

const SOON: Duration = Duration::from_secs(10);

fn latch(client: &ferrisson::Client, name: &str) -> CountDownLatch {
    CountDownLatch::new(client, name).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_waiters_of_four_clients_wake_on_the_last_count_down() {
    let redis = TestRedis::any();
    let name = unique_name("barrier");
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(client(&redis.url()).await);
    }
    let coordinator = latch(&clients[0], &name);
    assert!(coordinator.try_set_count(3).await.unwrap());
    let mut waiters = Vec::new();
    for i in 0..100 {
        let l = latch(&clients[i % 4], &name);
        waiters.push(tokio::spawn(async move {
            l.wait().await.unwrap();
            Instant::now()
        }));
    }
    eventually(SOON, "100 waiters subscribed", || async {
        clients.iter().map(|c| c.waiter_stats().1).sum::<usize>() == 100
    })
    .await;
    coordinator.count_down().await.unwrap();
    coordinator.count_down().await.unwrap();
    assert_eq!(coordinator.count().await.unwrap(), 1);
    let last = Instant::now();
    coordinator.count_down().await.unwrap();
    let woke = join_within(SOON, "all 100 waiters wake", waiters).await;
    let slowest = woke
        .iter()
        .map(|t| t.saturating_duration_since(last))
        .max()
        .unwrap();
    // Woken by the message, not by their own re-check (every 5 s).
    assert!(
        slowest < Duration::from_secs(2),
        "slowest waiter: {slowest:?}"
    );
    assert_eq!(coordinator.count().await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_times_out_or_returns_when_released() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    let l = latch(&a, &unique_name("timeout"));
    l.try_set_count(1).await.unwrap();
    let started = Instant::now();
    assert!(!l.wait_for(Duration::from_millis(300)).await.unwrap());
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(300), "{waited:?}");

    let waiting = l.clone();
    let waiter = tokio::spawn(async move { waiting.wait_for(SOON).await.unwrap() });
    eventually(SOON, "the waiter waits", || async {
        a.waiter_stats().1 == 1
    })
    .await;
    l.count_down().await.unwrap();
    assert!(tokio::time::timeout(SOON, waiter).await.unwrap().unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_participant_counts_once_and_missing_latches_are_open() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    let name = unique_name("participants");
    let l = latch(&a, &name);
    // Never set: count 0, counting down is a no-op, waiting returns at once.
    assert_eq!(l.count().await.unwrap(), 0);
    l.count_down().await.unwrap();
    assert_eq!(
        l.count_down_once("w1").await.unwrap(),
        CountDown::NotArmed,
        "a count-down on a latch nobody armed says so, never \"already counted\""
    );
    assert!(tokio::time::timeout(SOON, l.wait()).await.is_ok());
    assert_eq!(l.count().await.unwrap(), 0);
    let mut con = redis.connection();
    let exists: bool = con.exists(&name).unwrap();
    assert!(!exists, "counting down a missing latch leaves nothing");

    assert!(l.try_set_count(3).await.unwrap());
    assert!(!l.try_set_count(5).await.unwrap(), "already armed");
    assert_eq!(
        l.count_down_once("w1").await.unwrap(),
        CountDown::Counted(2)
    );
    assert_eq!(
        l.count_down_once("w1").await.unwrap(),
        CountDown::AlreadyCounted,
        "a repeated worker counts once"
    );
    assert_eq!(l.count().await.unwrap(), 2);
    assert_eq!(
        l.count_down_once("w2").await.unwrap(),
        CountDown::Counted(1)
    );
    assert_eq!(
        l.count_down_once("w3").await.unwrap(),
        CountDown::Counted(0)
    );
    assert_eq!(
        l.count_down_once("w4").await.unwrap(),
        CountDown::NotArmed,
        "a late worker is told the latch is open"
    );
    assert_eq!(l.count().await.unwrap(), 0);
    let leftovers: Vec<String> = con.keys(format!("*{name}*")).unwrap();
    let lasting: Vec<&String> = leftovers
        .iter()
        .filter(|key| con.pttl::<_, i64>(key.as_str()).unwrap() < 0)
        .collect();
    assert!(
        lasting.is_empty(),
        "an open latch leaves nothing lasting (call latches expire by themselves): {lasting:?}"
    );
    // Zero and empty arguments are clear errors.
    assert!(matches!(
        l.try_set_count(0).await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        l.count_down_once("").await,
        Err(Error::InvalidArgument(_))
    ));
    let text = unique_name("text");
    let _: () = con.hset(&text, "f", 1).unwrap();
    let err = latch(&a, &text).count().await.unwrap_err();
    assert!(matches!(err, Error::WrongType { .. }), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn re_arming_releases_the_old_round_and_holds_the_new() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    let name = unique_name("rounds");
    let l = latch(&a, &name);
    l.try_set_count(1).await.unwrap();
    let old = l.clone();
    let old_waiter = tokio::spawn(async move { old.wait_for(SOON).await.unwrap() });
    eventually(SOON, "the waiter waits", || async {
        a.waiter_stats().1 == 1
    })
    .await;
    // Opened and armed again in one transaction, with no message at all: the waiter never
    // sees zero, and only its own re-check can release it.
    let mut con = redis.connection();
    let _: () = redis::pipe()
        .atomic()
        .del(&name)
        .ignore()
        .set(&name, 1)
        .ignore()
        .incr(format!("{{{name}}}:round"), 1)
        .ignore()
        .query(&mut con)
        .unwrap();
    assert!(
        tokio::time::timeout(SOON, old_waiter)
            .await
            .unwrap()
            .unwrap(),
        "the earlier round's waiter is released"
    );
    // A waiter of the new round waits for it.
    assert!(!l.wait_for(Duration::from_millis(300)).await.unwrap());
    l.count_down().await.unwrap();
    assert!(l.wait_for(SOON).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_survive_a_redis_restart() {
    let mut server = RedisServer::spawn();
    let name = unique_name("restart");
    let a = client(&server.url()).await;
    let l = latch(&a, &name);
    l.try_set_count(1).await.unwrap();
    let mut waiters = Vec::new();
    for _ in 0..5 {
        let w = l.clone();
        waiters.push(tokio::spawn(async move { w.wait().await }));
    }
    eventually(SOON, "waiters wait", || async { a.waiter_stats().1 == 5 }).await;
    server.restart();
    // The coordinator sets the latch again and counts down; nobody hangs.
    let _ = tokio::time::timeout(SOON, async {
        loop {
            match l.try_set_count(1).await {
                Ok(_) => break,
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    })
    .await;
    l.count_down().await.unwrap();
    for result in join_within(SOON * 2, "every waiter returns", waiters).await {
        result.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_format_latches_interoperate() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    let mut con = redis.connection();
    let name = unique_name("redisson");
    // Redisson's trySetCount(2).
    let _: () = con.set(&name, 2).unwrap();
    let l = latch(&a, &name);
    assert_eq!(l.count().await.unwrap(), 2);
    let waiting = l.clone();
    let waiter = tokio::spawn(async move { waiting.wait_for(SOON).await.unwrap() });
    eventually(SOON, "the waiter waits", || async {
        a.waiter_stats().1 == 1
    })
    .await;
    l.count_down().await.unwrap();
    // Redisson's countDown to zero: DECR, DEL, publish 0 on its channel.
    let left: i64 = con.decr(&name, 1).unwrap();
    assert_eq!(left, 0);
    let _: () = con.del(&name).unwrap();
    let _: () = con
        .publish(format!("redisson_countdownlatch__channel__{{{name}}}"), 0)
        .unwrap();
    assert!(tokio::time::timeout(SOON, waiter).await.unwrap().unwrap());
    // And ours is readable by Redisson: a plain count.
    assert!(l.try_set_count(4).await.unwrap());
    let raw: i64 = con.get(&name).unwrap();
    assert_eq!(raw, 4);
    assert!(l.delete().await.unwrap());
    assert!(!l.delete().await.unwrap());
}
