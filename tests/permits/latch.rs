//! The countdown latch against a real Redis.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common;

use ferrisson::SyncObject;
use std::time::Duration;

use common::*;
use ferrisson::Error;
use ferrisson_latch::{CountDown, CountDownLatch, LatchStatus};
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
        CountDown::Completed,
        "a late worker is told the round completed"
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
    // (What the last count-down and a new round's try_set leave: the round remembered as
    // completed, the count set again, a new round.)
    let round: i64 = con.get(format!("{{{name}}}:round")).unwrap();
    let _: () = redis::pipe()
        .atomic()
        .del(&name)
        .ignore()
        .set(format!("{{{name}}}:completed"), round)
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

/// Redis restarts without persistence under an armed latch: the barrier's data is gone, and
/// no waiter is released as if it had opened. Each fails with `LatchLost`, whether it looks
/// before the coordinator arms the latch again or after; none hangs. Three rounds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_without_persistence_under_an_armed_latch_releases_no_waiter() {
    let mut server = RedisServer::spawn();
    let name = unique_name("restart");
    let a = client(&server.url()).await;
    let l = latch(&a, &name);
    for round in 0..3 {
        assert!(l.try_set_count_new_round(2).await.unwrap(), "round {round}");
        l.count_down().await.unwrap();
        let mut waiters = Vec::new();
        for _ in 0..5 {
            let w = l.clone();
            waiters.push(tokio::spawn(async move { w.wait().await }));
        }
        eventually(SOON, "waiters wait", || async { a.waiter_stats().1 == 5 }).await;
        server.restart();
        if round == 1 {
            // The coordinator arms it again at once: a new round is no opening of the old.
            eventually(SOON, "the coordinator arms it again", || async {
                l.try_set_count(2).await.is_ok()
            })
            .await;
        }
        for result in join_within(SOON * 2, "every waiter returns", waiters).await {
            let err = result.unwrap_err();
            assert!(matches!(err, Error::LatchLost(_)), "round {round}: {err:?}");
            assert!(err.to_string().contains("Redis lost it"), "{err}");
        }
        // Nothing counted in a lost round counts in the next.
        let _ = l.delete().await;
    }
    // A handle with Redisson's reading releases its waiters instead.
    let open = l.missing_is_open();
    assert!(open.try_set_count(1).await.unwrap());
    let w = open.clone();
    let waiter = tokio::spawn(async move { w.wait().await });
    eventually(SOON, "the waiter waits", || async {
        a.waiter_stats().1 == 1
    })
    .await;
    server.restart();
    tokio::time::timeout(SOON * 2, waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

/// A coordinator that restarts after its barrier opened is told so, not made to wait for a
/// round nobody will count down: `try_set_count` does not arm a completed latch, `status`
/// says `Completed` where `count` reads 0 either way, a worker run again is told
/// `Completed`. A new round on purpose arms it; when the memory ends, it reads as never
/// armed again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completed_round_is_remembered_for_the_restarted_coordinator_and_workers() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    let name = unique_name("remembered");
    let l = latch(&a, &name)
        .with_completion_memory(Duration::from_millis(1500))
        .unwrap();
    assert_eq!(l.status().await.unwrap(), LatchStatus::Open);
    assert!(l.try_set_count(2).await.unwrap());
    assert_eq!(l.status().await.unwrap(), LatchStatus::Armed(2));
    assert_eq!(
        l.count_down_once("w1").await.unwrap(),
        CountDown::Counted(1)
    );
    assert_eq!(
        l.count_down_once("w2").await.unwrap(),
        CountDown::Counted(0)
    );
    // The coordinator restarts: same name, same call.
    let again = latch(&a, &name);
    assert!(!again.try_set_count(2).await.unwrap(), "not armed again");
    assert_eq!(again.status().await.unwrap(), LatchStatus::Completed);
    assert_eq!(again.count().await.unwrap(), 0);
    assert!(
        again.wait_for(SOON).await.unwrap(),
        "its wait returns at once"
    );
    assert_eq!(
        again.count_down_once("w1").await.unwrap(),
        CountDown::Completed,
        "a worker run again is told"
    );
    // A new round on purpose.
    assert!(again.try_set_count_new_round(1).await.unwrap());
    assert_eq!(again.status().await.unwrap(), LatchStatus::Armed(1));
    assert!(!again.try_set_count_new_round(1).await.unwrap(), "armed");
    again.count_down().await.unwrap();
    // The memory set by the handle that opened it (an hour) stands; a short one ends.
    l.try_set_count_new_round(1).await.unwrap();
    l.count_down().await.unwrap();
    assert_eq!(l.status().await.unwrap(), LatchStatus::Completed);
    eventually(SOON, "the completion is forgotten", || async {
        l.status().await.unwrap() == LatchStatus::Open
    })
    .await;
    assert!(l.try_set_count(1).await.unwrap());
    assert!(matches!(
        l.with_completion_memory(Duration::ZERO),
        Err(Error::InvalidArgument(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_format_latches_interoperate() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    let mut con = redis.connection();
    let name = unique_name("redisson");
    // Redisson's trySetCount(2).
    let _: () = con.set(&name, 2).unwrap();
    // Redisson's countDown leaves no completion behind: a waiter reads a missing latch as
    // open only with Redisson's reading.
    let l = latch(&a, &name).missing_is_open();
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
