//! The fair lock against a real Redis.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common;

use ferrisson::Lock;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use ferrisson::{AcquireOptions, Client, Error, LossReason};
use ferrisson_fair_lock::FairLock;
use redis::Commands;
use tokio::time::Instant;

const SOON: Duration = Duration::from_secs(10);
/// A short waiter timeout, so that dead waiters are dropped quickly in tests.
const WAITER_TIMEOUT: Duration = Duration::from_millis(800);

fn fair(client: &Client, name: &str) -> FairLock {
    FairLock::new(client, name)
        .unwrap()
        .with_waiter_timeout(WAITER_TIMEOUT)
        .unwrap()
}

/// The keys of lock `name` left in Redis, leaving out the clients' records (they live for
/// twice the retry window by design); panics if a record has no expiry.
fn keys_left(con: &mut redis::Connection, name: &str) -> Vec<String> {
    let keys: Vec<String> = con.keys(format!("*{name}*")).unwrap();
    keys.into_iter()
        .filter(|k| {
            // The client's record and undone marks on the lock: bookkeeping that expires.
            if k.contains(":record:") || k.contains(":undone:") {
                let ttl: i64 = con.pttl(k).unwrap();
                assert!(ttl > 0, "record {k} has no expiry");
                false
            } else {
                true
            }
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_of_four_clients_acquire_in_queue_order() {
    let redis = TestRedis::any();
    let name = unique_name("fifo");
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(client(&redis.url()).await);
    }
    let holder = fair(&clients[0], &name);
    let guard = holder.lock().await.unwrap();

    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..32 {
        let lock = fair(&clients[i % 4], &name);
        let order = order.clone();
        tasks.push(tokio::spawn(async move {
            let guard = lock.lock().await.unwrap();
            order.lock().unwrap().push(i);
            guard.unlock().await.unwrap();
        }));
        // Queue them one by one, so that the queue order is known.
        wait_queue_length(&holder, i + 1).await;
    }
    guard.unlock().await.unwrap();
    join_within(SOON * 3, "all 32 waiters acquire", tasks).await;
    assert_eq!(*order.lock().unwrap(), (0..32).collect::<Vec<_>>());

    let mut con = redis.connection();
    assert_eq!(keys_left(&mut con, &name), Vec::<String>::new());
}

/// A client whose process is frozen (its runtime thread blocked, its connections killed):
/// to Redis it is a dead waiter.
struct FrozenClient {
    thread: common::frozen::FrozenThread<()>,
    /// Its connection ids (`CLIENT LIST`).
    connections: Vec<i64>,
}

fn connection_ids(con: &mut redis::Connection) -> Vec<i64> {
    let list: String = redis::cmd("CLIENT").arg("LIST").query(con).unwrap();
    list.lines()
        .filter_map(|line| line.strip_prefix("id="))
        .filter_map(|rest| rest.split(' ').next())
        .filter_map(|id| id.parse().ok())
        .collect()
}

impl FrozenClient {
    /// Starts a client on its own thread, queues it on `name`, then freezes the thread.
    async fn queue_then_freeze(
        con: &mut redis::Connection,
        url: String,
        name: String,
        observer: &FairLock,
        queued: usize,
    ) -> Self {
        let before = connection_ids(con);
        let mut thread = common::frozen::FrozenThread::spawn(move || async move {
            let client = client(&url).await;
            let _ = fair(&client, &name).lock().await;
        });
        wait_queue_length(observer, queued).await;
        thread.freeze().await;
        let connections = connection_ids(con)
            .into_iter()
            .filter(|id| !before.contains(id))
            .collect();
        Self {
            thread,
            connections,
        }
    }

    async fn thaw(self) {
        self.thread.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_waiter_at_the_head_delays_the_queue_by_at_most_the_waiter_timeout() {
    let server = RedisServer::spawn();
    let name = unique_name("dead-head");
    let a = client(&server.url()).await;
    let holder = fair(&a, &name);
    let guard = holder.lock().await.unwrap();

    let mut con = server.connection();
    let dead =
        FrozenClient::queue_then_freeze(&mut con, server.url(), name.clone(), &holder, 1).await;
    assert!(!dead.connections.is_empty());
    let b = client(&server.url()).await;
    let live = fair(&b, &name);
    let waiter = tokio::spawn(async move {
        let guard = live.lock().await.unwrap();
        let at = Instant::now();
        guard.unlock().await.unwrap();
        at
    });
    wait_queue_length(&holder, 2).await;
    // The frozen client's connections go too, as when its process is killed.
    for id in &dead.connections {
        let _: redis::RedisResult<()> = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("ID")
            .arg(id)
            .query(&mut con);
    }

    let released = Instant::now();
    guard.unlock().await.unwrap_or(());
    let acquired = tokio::time::timeout(SOON, waiter).await.unwrap().unwrap();
    // The dead head's deadline was at most a waiter timeout after its last call (before the
    // release); the live waiter passes it within one heartbeat after that.
    let waited = acquired.saturating_duration_since(released);
    assert!(
        waited <= WAITER_TIMEOUT * 2,
        "the live waiter waited {waited:?} behind a dead head (waiter timeout {WAITER_TIMEOUT:?})"
    );
    dead.thaw().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_waiter_keeps_its_place_however_long_the_lock_is_held() {
    let redis = TestRedis::any();
    let name = unique_name("patient");
    let a = client(&redis.url()).await;
    let b = client(&redis.url()).await;
    let holder = fair(&a, &name);
    let guard = holder.lock().await.unwrap();

    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for (i, c) in [&b, &a].into_iter().enumerate() {
        let lock = fair(c, &name);
        let order = order.clone();
        tasks.push(tokio::spawn(async move {
            let guard = lock.lock().await.unwrap();
            order.lock().unwrap().push(i);
            guard.unlock().await.unwrap();
        }));
        wait_queue_length(&holder, i + 1).await;
    }
    // Held for five waiter timeouts: both waiters must still be queued, in order.
    let until = Instant::now() + WAITER_TIMEOUT * 5;
    while Instant::now() < until {
        assert_eq!(holder.queue_length().await.unwrap(), 2);
        tokio::time::sleep(WAITER_TIMEOUT / 4).await;
    }
    guard.unlock().await.unwrap();
    join_within(SOON, "both waiters acquire", tasks).await;
    assert_eq!(*order.lock().unwrap(), vec![0, 1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_that_gives_up_leaves_the_queue_at_once() {
    let redis = TestRedis::any();
    let name = unique_name("leave");
    let a = client(&redis.url()).await;
    let holder = fair(&a, &name);
    let guard = holder.lock().await.unwrap();
    let mut con = redis.connection();

    // Cancelled: the future is dropped while waiting.
    let lock = fair(&a, &name);
    let cancelled = tokio::spawn(async move { lock.lock().await.map(drop) });
    wait_queue_length(&holder, 1).await;
    cancelled.abort();
    wait_queue_length(&holder, 0).await;

    // Timed out: gone when the call returns.
    let lock = fair(&a, &name);
    let timed_out = tokio::spawn(async move {
        lock.try_lock_with(AcquireOptions::new().with_wait(Duration::from_millis(300)))
            .await
            .unwrap()
            .is_none()
    });
    wait_queue_length(&holder, 1).await;
    assert!(timed_out.await.unwrap(), "the wait limit passed");
    assert_eq!(holder.queue_length().await.unwrap(), 0);
    let err = fair(&a, &name)
        .owned_by(a.new_owner())
        .lock_with(AcquireOptions::new().with_wait(Duration::from_millis(100)))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Timeout(_)), "{err:?}");

    guard.unlock().await.unwrap();
    assert_eq!(keys_left(&mut con, &name), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_lock_does_not_jump_the_queue_and_does_not_join_it() {
    let redis = TestRedis::any();
    let name = unique_name("try");
    let a = client(&redis.url()).await;
    let mut con = redis.connection();
    let lock = fair(&a, &name);
    // A Redisson waiter queued ahead (its deadline far ahead), the lock itself free.
    let queue = format!("redisson_lock_queue:{{{name}}}");
    let timeouts = format!("redisson_lock_timeout:{{{name}}}");
    let redisson_waiter = "6f1c2a8e-0000-4000-8000-000000000000:77";
    let _: () = con.rpush(&queue, redisson_waiter).unwrap();
    let far = now_ms(&mut con) + 60_000;
    let _: () = con.zadd(&timeouts, redisson_waiter, far).unwrap();

    assert!(
        lock.try_lock().await.unwrap().is_none(),
        "a waiter is ahead"
    );
    assert_eq!(
        lock.queue_length().await.unwrap(),
        1,
        "try_lock did not queue"
    );

    // Once that waiter is gone, the lock is free for anyone.
    let _: () = con.del(&[&queue, &timeouts]).unwrap();
    let guard = lock.try_lock().await.unwrap().expect("free, nobody queued");
    guard.unlock().await.unwrap();
}

fn now_ms(con: &mut redis::Connection) -> i64 {
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query(con).unwrap();
    secs * 1000 + micros / 1000
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_format_holders_and_waiters_interoperate() {
    let redis = TestRedis::any();
    let name = unique_name("interop");
    let a = client(&redis.url()).await;
    let mut con = redis.connection();
    let lock = fair(&a, &name);

    // A Redisson holder: the hash with its owner, under a lease.
    let redisson_owner = "0d2f4a6c-1111-4222-8333-444455556666:1";
    let _: () = con.hset(&name, redisson_owner, 1).unwrap();
    let _: () = con.pexpire(&name, 30_000).unwrap();
    assert!(lock.is_locked().await.unwrap());
    assert!(lock.try_lock().await.unwrap().is_none());

    let waiting = lock.clone();
    let waiter = tokio::spawn(async move { waiting.lock().await.unwrap() });
    wait_queue_length(&lock, 1).await;
    let queued: Vec<String> = con
        .lrange(format!("redisson_lock_queue:{{{name}}}"), 0, -1)
        .unwrap();
    assert_eq!(queued.len(), 1);
    assert!(
        queued[0].starts_with(a.id()),
        "the queue holds our owner: {queued:?}"
    );

    // Redisson's unlock: delete the hash, publish 0 on the head waiter's own channel.
    let _: () = con.del(&name).unwrap();
    let _: () = con
        .publish(
            format!("redisson_lock__channel:{{{name}}}:{}", queued[0]),
            0,
        )
        .unwrap();
    let guard = tokio::time::timeout(SOON, waiter).await.unwrap().unwrap();
    let held: i64 = con.hget(&name, guard.owner().as_str()).unwrap();
    assert_eq!(held, 1);
    assert_eq!(lock.queue_length().await.unwrap(), 0);
    guard.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentry_leases_tokens_and_force_unlock_behave_as_for_the_reentrant_lock() {
    let redis = TestRedis::any();
    let name = unique_name("surface");
    let a = client(&redis.url()).await;
    let b = client(&redis.url()).await;
    let lock = FairLock::fenced(&a, &name).unwrap().owned_by(a.new_owner());

    let first = lock.lock().await.unwrap();
    let second = lock.lock().await.unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 2);
    assert!(second.token() > first.token());
    second.unlock().await.unwrap();
    assert!(lock.is_held_by_current().await.unwrap());
    first.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
    let unheld = fair(&b, &name);
    assert_eq!(
        unheld.owned_by(b.new_owner()).hold_count().await.unwrap(),
        0
    );

    // Fixed leases, force unlock and wrong types of every lock kind: tests/locks/conformance.rs.
    // Force unlock frees it for the waiter and the holder is told.
    let holder = lock.lock().await.unwrap();
    let other = FairLock::fenced(&b, &name).unwrap();
    let waiting = other.clone();
    let waiter = tokio::spawn(async move { waiting.lock().await.unwrap() });
    wait_queue_length(&lock, 1).await;
    assert!(other.force_unlock().await.unwrap());
    let got = tokio::time::timeout(SOON, waiter).await.unwrap().unwrap();
    assert!(got.token() > holder.token());
    let err = holder.unlock().await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::NotOwner(_) | Error::LeaseLost(LossReason::NotHeld)
        ),
        "{err:?}"
    );
    got.unlock().await.unwrap();
    assert!(!other.force_unlock().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_and_wrong_types_get_clear_errors() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    assert!(matches!(
        FairLock::new(&a, ""),
        Err(Error::InvalidArgument(_))
    ));
    let lock = FairLock::new(&a, &unique_name("bad")).unwrap();
    assert!(matches!(
        lock.with_waiter_timeout(Duration::from_millis(10)),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        lock.lock_with(AcquireOptions::new().with_lease(Duration::ZERO))
            .await,
        Err(Error::InvalidArgument(_))
    ));
    let name = unique_name("string");
    let mut con = redis.connection();
    let _: () = con.set(&name, "not a lock").unwrap();
    let err = fair(&a, &name).lock().await.unwrap_err();
    assert!(matches!(err, Error::WrongType { .. }), "{err:?}");
    let _: String = con.get(&name).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_exclusion_holds_across_clients() {
    let redis = TestRedis::any();
    let name = unique_name("exclusive");
    let counter = Arc::new(Mutex::new((0u32, 0u32)));
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let c = client(&redis.url()).await;
        for _ in 0..4 {
            let lock = fair(&c, &name);
            let counter = counter.clone();
            tasks.push(tokio::spawn(async move {
                for _ in 0..5 {
                    let guard = lock.lock().await.unwrap();
                    {
                        let mut c = counter.lock().unwrap();
                        c.0 += 1;
                        c.1 = c.1.max(c.0);
                    }
                    tokio::task::yield_now().await;
                    counter.lock().unwrap().0 -= 1;
                    guard.unlock().await.unwrap();
                }
            }));
        }
    }
    join_within(SOON * 3, "80 fair acquisitions", tasks).await;
    assert_eq!(counter.lock().unwrap().1, 1, "never two holders at once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_lock_futures_leak_neither_holds_nor_queue_entries() {
    let redis = TestRedis::any();
    let name = unique_name("dropped");
    let a = client(&redis.url()).await;
    let b = client(&redis.url()).await;
    let lock = fair(&a, &name);
    let mut con = redis.connection();
    let other = fair(&b, &name);
    drop_calls_at_every_stage(
        40,
        || async { other.lock().await.unwrap() },
        |_| {
            let call = lock.owned_by(a.new_owner());
            async move { call.lock().await.map(drop) }
        },
    )
    .await;
    eventually(SOON, "no hold and no queue entry left", || async {
        !lock.is_locked().await.unwrap() && lock.queue_length().await.unwrap() == 0
    })
    .await;
    assert_eq!(keys_left(&mut con, &name), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_back_while_its_channel_lingers_tries_once_before_it_sleeps() {
    let redis = TestRedis::any();
    let (a, b) = (client(&redis.url()).await, client(&redis.url()).await);
    let name = unique_name("linger");
    // A long waiter timeout: no heartbeat try lands in the counted window.
    let patient = Duration::from_secs(60);
    // A handle bound to one owner waits on that owner's channel every time.
    let on_a = FairLock::new(&a, &name)
        .unwrap()
        .with_waiter_timeout(patient)
        .unwrap()
        .owned_by(a.new_owner());
    let on_b = FairLock::new(&b, &name)
        .unwrap()
        .with_waiter_timeout(patient)
        .unwrap();
    let held = on_b.lock().await.unwrap();
    let (first_done, first_done_rx) = tokio::sync::oneshot::channel::<()>();
    let (go, go_rx) = tokio::sync::oneshot::channel::<()>();
    // One task waits twice: its own channel, subscribed for the first wait, lingers.
    let waiter = tokio::spawn(async move {
        on_a.lock().await.unwrap().unlock().await.unwrap();
        first_done.send(()).unwrap();
        go_rx.await.unwrap();
        on_a.lock().await.unwrap().unlock().await.unwrap();
    });
    eventually(SOON, "the first wait", || async { a.waiter_stats().1 == 1 }).await;
    held.unlock().await.unwrap();
    first_done_rx.await.unwrap();
    let held = on_b.lock().await.unwrap();
    let mut con = redis.connection();
    let before = settled_command_calls(&mut con).await;
    go.send(()).unwrap();
    eventually(SOON, "the second wait", || async {
        a.waiter_stats().1 == 1
    })
    .await;
    let after = settled_command_calls(&mut con).await;
    assert_eq!(
        delta(&before, &after, "evalsha"),
        1,
        "registered on the lingering channel before its try: no try after subscribing"
    );
    assert_eq!(delta(&before, &after, "subscribe"), 0, "nor a SUBSCRIBE");
    held.unlock().await.unwrap();
    tokio::time::timeout(SOON, waiter).await.unwrap().unwrap();
}
