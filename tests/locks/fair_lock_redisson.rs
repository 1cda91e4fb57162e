//! One fair-lock queue shared by Redisson and ferrisson waiters.
//!
//! The Redisson side is played by this test: its `RFairLock` state transitions as Redisson
//! performs them, written here as our own scripts: the acquire purges waiters whose timeout has
//! passed, takes a free lock when the queue is empty or the caller is its head (then brings
//! every remaining timeout a thread wait time closer), or joins the queue with the last
//! waiter's timeout (or the lock's TTL) plus the thread wait time, and never refreshes it; the
//! unlock purges the same way and publishes `0` on the next waiter's own channel
//! `redisson_lock__channel:{name}:<owner>`. A Redisson waiter tries, subscribes to its channel,
//! and tries again on each message or when the TTL it was told runs out, with the client's
//! clock as "now" (Redisson passes it in).
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use ferrisson::{Client, Lock};
use ferrisson_fair_lock::{FairLock, REDISSON_THREAD_WAIT};
use futures::StreamExt;

/// What both of Redisson's fair scripts do first: drop the waiters at the head whose timeout
/// has passed (`now`: the client's clock, an argument of the script).
const REDISSON_PURGE: &str = r"
while true do
  local first = redis.call('lindex', KEYS[2], 0)
  if first == false then break end
  local timeout = tonumber(redis.call('zscore', KEYS[3], first))
  if timeout <= now then
    redis.call('zrem', KEYS[3], first)
    redis.call('lpop', KEYS[2])
  else
    break
  end
end
";

/// Redisson's fair acquire after the purge, as it behaves: `nil` when taken, else the ms to
/// wait.
const REDISSON_ACQUIRE: &str = r"
if redis.call('exists', KEYS[1]) == 0 and (redis.call('exists', KEYS[2]) == 0
    or redis.call('lindex', KEYS[2], 0) == ARGV[2]) then
  redis.call('lpop', KEYS[2])
  redis.call('zrem', KEYS[3], ARGV[2])
  local waiting = redis.call('zrange', KEYS[3], 0, -1)
  for i = 1, #waiting do
    redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), waiting[i])
  end
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
local mine = redis.call('zscore', KEYS[3], ARGV[2])
if mine ~= false then
  return mine - tonumber(ARGV[3]) - now
end
local last = redis.call('lindex', KEYS[2], -1)
local ttl
if last ~= false and last ~= ARGV[2] then
  ttl = tonumber(redis.call('zscore', KEYS[3], last)) - now
else
  ttl = redis.call('pttl', KEYS[1])
end
if redis.call('zadd', KEYS[3], ttl + tonumber(ARGV[3]) + now, ARGV[2]) == 1 then
  redis.call('rpush', KEYS[2], ARGV[2])
end
return ttl
";

/// Redisson's fair unlock after the purge, as it behaves.
const REDISSON_UNLOCK: &str = r"
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return nil
end
if redis.call('hincrby', KEYS[1], ARGV[2], -1) > 0 then
  return 0
end
redis.call('del', KEYS[1])
local next = redis.call('lindex', KEYS[2], 0)
if next ~= false then
  redis.call('publish', KEYS[4] .. ':' .. next, '0')
end
return 1
";

/// One of Redisson's fair scripts: "now" from `ARGV[now_arg]`, the purge, then `body`.
fn redisson_script(now_arg: usize, body: &str) -> redis::Script {
    redis::Script::new(&format!(
        "local now = tonumber(ARGV[{now_arg}])\n{REDISSON_PURGE}{body}"
    ))
}

/// Redisson's lease when the watchdog keeps the lock.
const REDISSON_LEASE_MS: u64 = 30_000;

struct Keys {
    lock: String,
    queue: String,
    timeouts: String,
    channel: String,
}

impl Keys {
    fn of(name: &str) -> Self {
        Self {
            lock: name.to_owned(),
            queue: format!("redisson_lock_queue:{{{name}}}"),
            timeouts: format!("redisson_lock_timeout:{{{name}}}"),
            channel: format!("redisson_lock__channel:{{{name}}}"),
        }
    }
}

/// A Redisson client's `lock()` of the fair lock `name` as `owner`, then a short hold and its
/// `unlock()`, noting `label` in `served` when it got the lock.
async fn redisson_lock_and_unlock(
    url: String,
    name: String,
    owner: String,
    label: &'static str,
    served: Arc<Mutex<Vec<&'static str>>>,
) {
    let client = redis::Client::open(url).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let keys = Keys::of(&name);
    let acquire = redisson_script(4, REDISSON_ACQUIRE);
    let unlock = redisson_script(3, REDISSON_UNLOCK);
    let try_once = |con: &mut redis::aio::MultiplexedConnection| {
        let mut invocation = acquire.key(&keys.lock);
        invocation
            .key(&keys.queue)
            .key(&keys.timeouts)
            .arg(REDISSON_LEASE_MS)
            .arg(&owner)
            .arg(u64::try_from(REDISSON_THREAD_WAIT.as_millis()).unwrap())
            .arg(wall_ms());
        let mut con = con.clone();
        async move {
            let ttl: Option<i64> = invocation.invoke_async(&mut con).await.unwrap();
            ttl
        }
    };
    if try_once(&mut con).await.is_some() {
        // Redisson subscribes after its first failed try, then tries again in a loop.
        let mut pubsub = client.get_async_pubsub().await.unwrap();
        pubsub
            .subscribe(format!("{}:{owner}", keys.channel))
            .await
            .unwrap();
        let mut messages = pubsub.into_on_message();
        while let Some(ttl) = try_once(&mut con).await {
            // A negative TTL: wait for the message alone (Redisson's `acquire()` of the latch).
            let bound = u64::try_from(ttl).map_or(Duration::from_secs(3600), Duration::from_millis);
            let _ = tokio::time::timeout(bound, messages.next()).await;
        }
    }
    served.lock().unwrap().push(label);
    tokio::time::sleep(Duration::from_millis(20)).await;
    let released: Option<i64> = unlock
        .key(&keys.lock)
        .key(&keys.queue)
        .key(&keys.timeouts)
        .key(&keys.channel)
        .arg(REDISSON_LEASE_MS)
        .arg(&owner)
        .arg(wall_ms())
        .invoke_async(&mut con)
        .await
        .unwrap();
    assert_eq!(released, Some(1), "{label}: Redisson's unlock");
}

/// A ferrisson waiter: `lock()`, a short hold, `unlock()`.
async fn ferrisson_lock_and_unlock(
    client: Client,
    name: String,
    label: &'static str,
    served: Arc<Mutex<Vec<&'static str>>>,
) {
    let lock = FairLock::new(&client, &name).unwrap();
    let guard = lock.lock().await.unwrap();
    served.lock().unwrap().push(label);
    tokio::time::sleep(Duration::from_millis(20)).await;
    guard.unlock().await.unwrap();
}

/// Queues the waiters `order` (R = Redisson, F = ferrisson) one after the other behind a
/// ferrisson holder, holds for `hold`, and returns the order they were served in.
async fn mixed_queue(order: &[&'static str], hold: Duration) -> Vec<&'static str> {
    let server = RedisServer::spawn();
    let url = server.url();
    let name = unique_name("mixed-fair");
    let keys = Keys::of(&name);
    let client = client(&url).await;
    let holder = FairLock::new(&client, &name).unwrap().lock().await.unwrap();
    let served = Arc::new(Mutex::new(Vec::new()));
    let mut con = server.connection();
    let mut tasks = Vec::new();
    for (i, label) in order.iter().enumerate() {
        let served = served.clone();
        tasks.push(if label.starts_with('R') {
            tokio::spawn(redisson_lock_and_unlock(
                url.clone(),
                name.clone(),
                format!("redisson-{}:{i}", uuid_like(i)),
                label,
                served,
            ))
        } else {
            // Each ferrisson waiter on a client of its own, as different services would be.
            let client = common::client(&url).await;
            tokio::spawn(ferrisson_lock_and_unlock(
                client,
                name.clone(),
                label,
                served,
            ))
        });
        // Queued before the next one comes.
        eventually(Duration::from_secs(5), "the waiter queues", || {
            let len: usize = redis::cmd("LLEN").arg(&keys.queue).query(&mut con).unwrap();
            async move { len == i + 1 }
        })
        .await;
    }
    // A long hold: ferrisson waiters call again and again meanwhile; Redisson's never do.
    let until = tokio::time::Instant::now()
        .checked_add(hold)
        .expect("the hold's end fits the clock");
    while tokio::time::Instant::now() < until {
        let ttl: i64 = redis::cmd("PTTL").arg(&keys.queue).query(&mut con).unwrap();
        assert_eq!(
            ttl, -1,
            "the queue must keep Redisson's lifetime (no expiry)"
        );
        let ttl: i64 = redis::cmd("PTTL")
            .arg(&keys.timeouts)
            .query(&mut con)
            .unwrap();
        assert_eq!(
            ttl, -1,
            "the timeouts must keep Redisson's lifetime (no expiry)"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    holder.unlock().await.unwrap();
    join_within(Duration::from_secs(20), "every waiter is served", tasks).await;
    let served = served.lock().unwrap().clone();
    let left: usize = redis::cmd("LLEN").arg(&keys.queue).query(&mut con).unwrap();
    assert_eq!(left, 0, "nobody is left in the queue");
    served
}

fn uuid_like(i: usize) -> String {
    format!("{i:08x}-0000-4000-8000-{:012x}", i * 7919)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_and_ferrisson_waiters_are_served_in_queue_order() {
    let order = ["R1", "F1", "R2", "F2", "R3", "F3"];
    assert_eq!(mixed_queue(&order, Duration::from_secs(3)).await, order);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ferrisson_first_then_redisson_waiters_are_served_in_queue_order() {
    let order = ["F1", "R1", "R2", "F2", "F3", "R3"];
    assert_eq!(mixed_queue(&order, Duration::from_secs(3)).await, order);
}

/// The fair lock's queue, head first.
fn queue_of(con: &mut redis::Connection, keys: &Keys) -> Vec<String> {
    redis::cmd("LRANGE")
        .arg(&keys.queue)
        .arg(0)
        .arg(-1)
        .query(con)
        .unwrap()
}

/// Puts a dead ferrisson waiter at the tail of the queue, as a ferrisson process that died
/// leaves it: a Redisson-arithmetic timeout far ahead (ten minutes), a liveness deadline past.
fn plant_dead_waiter(con: &mut redis::Connection, name: &str, owner: &str) {
    let keys = Keys::of(name);
    let now = wall_ms();
    let _: () = redis::pipe()
        .cmd("RPUSH")
        .arg(&keys.queue)
        .arg(owner)
        .cmd("ZADD")
        .arg(&keys.timeouts)
        .arg(now + 600_000)
        .arg(owner)
        .cmd("ZADD")
        .arg(format!("{{{name}}}:alive"))
        .arg(now - 1)
        .arg(owner)
        .query(con)
        .unwrap();
}

/// A ferrisson waiter whose process died sits at the head of the queue: a Redisson waiter
/// behind it is woken by the next ferrisson release (which drops the dead head first, as
/// Redisson's unlock drops its own dead), and a ferrisson waiter behind one drops it at its
/// first call; nobody waits for the dead waiter's ten-minute Redisson timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_ferrisson_waiter_strands_nobody() {
    let server = RedisServer::spawn();
    let url = server.url();
    let name = unique_name("dead-fair");
    let keys = Keys::of(&name);
    let client = client(&url).await;
    let lock = FairLock::new(&client, &name).unwrap();
    let mut con = server.connection();
    let served = Arc::new(Mutex::new(Vec::new()));

    // Behind a dead ferrisson waiter: a Redisson waiter.
    let holder = lock.lock().await.unwrap();
    plant_dead_waiter(&mut con, &name, "deadbeef-0000-4000-8000-000000000000:1");
    let redisson = tokio::spawn(redisson_lock_and_unlock(
        url.clone(),
        name.clone(),
        format!("{}:1", uuid_like(1)),
        "R1",
        served.clone(),
    ));
    eventually(Duration::from_secs(5), "the Redisson waiter queues", || {
        let len: usize = redis::cmd("LLEN").arg(&keys.queue).query(&mut con).unwrap();
        async move { len == 2 }
    })
    .await;
    holder.unlock().await.unwrap();
    join_within(
        Duration::from_secs(5),
        "the Redisson waiter is served",
        vec![redisson],
    )
    .await;

    // Behind a dead ferrisson waiter: a ferrisson waiter.
    let holder = lock.lock().await.unwrap();
    plant_dead_waiter(&mut con, &name, "deadbeef-0000-4000-8000-000000000000:2");
    let ferrisson = tokio::spawn(ferrisson_lock_and_unlock(
        common::client(&url).await,
        name.clone(),
        "F1",
        served.clone(),
    ));
    eventually(
        Duration::from_secs(5),
        "the ferrisson waiter drops the dead one",
        || {
            let queue = queue_of(&mut con, &keys);
            async move { queue.len() == 1 && !queue[0].starts_with("deadbeef") }
        },
    )
    .await;
    holder.unlock().await.unwrap();
    join_within(
        Duration::from_secs(5),
        "the ferrisson waiter is served",
        vec![ferrisson],
    )
    .await;
    assert_eq!(*served.lock().unwrap(), ["R1", "F1"]);
    assert!(!lock.is_locked().await.unwrap());
}

/// A ferrisson waiter that gives up moves the waiters behind it up a place, as Redisson's own
/// `acquireFailed` does: a Redisson waiter queued behind it has its timeout brought a wait
/// closer, so that it is not counted alive a wait longer for every ferrisson waiter that left
/// ahead of it (were it to die, the queue would wait that much longer for it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ferrisson_waiter_that_leaves_moves_redisson_waiters_behind_it_up() {
    let server = RedisServer::spawn();
    let name = unique_name("fair-leave");
    let keys = Keys::of(&name);
    let holder = client(&server.url()).await;
    let waiter = client(&server.url()).await;
    let mut con = server.connection();
    let held = FairLock::new(&holder, &name).unwrap().lock().await.unwrap();
    let lock = FairLock::new(&waiter, &name).unwrap();
    let leaving = tokio::spawn({
        let lock = lock.clone();
        async move {
            lock.try_lock_with(ferrisson::AcquireOptions::new().with_wait(Duration::from_secs(2)))
                .await
                .unwrap()
        }
    });
    wait_queue_length(&lock, 1).await;
    // A Redisson waiter behind it, with Redisson's arithmetic: the last waiter's timeout plus
    // a wait.
    let ahead = queue_of(&mut con, &keys);
    let ahead_timeout: f64 = redis::cmd("ZSCORE")
        .arg(&keys.timeouts)
        .arg(&ahead[0])
        .query(&mut con)
        .unwrap();
    let wait = REDISSON_THREAD_WAIT.as_millis() as f64;
    let redisson = format!("{}:7", uuid_like(7));
    let _: () = redis::pipe()
        .cmd("RPUSH")
        .arg(&keys.queue)
        .arg(&redisson)
        .cmd("ZADD")
        .arg(&keys.timeouts)
        .arg(ahead_timeout + wait)
        .arg(&redisson)
        .query(&mut con)
        .unwrap();
    // The ferrisson waiter's wait runs out: it leaves.
    assert!(leaving.await.unwrap().is_none(), "the lock stayed held");
    let queue = queue_of(&mut con, &keys);
    assert_eq!(
        queue,
        vec![redisson.clone()],
        "only the Redisson waiter is left"
    );
    let timeout: f64 = redis::cmd("ZSCORE")
        .arg(&keys.timeouts)
        .arg(&redisson)
        .query(&mut con)
        .unwrap();
    // Redisson's acquireFailed: the leaver's own wait (a tryLock's, here 2 s) comes off the
    // timeouts behind it.
    assert_eq!(
        timeout,
        ahead_timeout + wait - 2000.0,
        "moved up a place: its timeout the leaver's wait closer"
    );
    held.unlock().await.unwrap();
}

/// A waiter's score in the queue's timeouts.
fn timeout_of(con: &mut redis::Connection, keys: &Keys, waiter: &str) -> Option<i64> {
    redis::cmd("ZSCORE")
        .arg(&keys.timeouts)
        .arg(waiter)
        .query(con)
        .unwrap()
}

/// The queue's waiters, head first.
fn queued(con: &mut redis::Connection, keys: &Keys) -> Vec<String> {
    redis::cmd("LRANGE")
        .arg(&keys.queue)
        .arg(0)
        .arg(-1)
        .query(con)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_try_with_a_wait_queues_with_its_wait_as_redissons_try_lock_does() {
    // Redisson's tryLock(wait, …) steps the queue's timeouts by its wait, not by the thread
    // wait time: F1 (a ferrisson try with a 1.5 s wait), R1 (Redisson's, 500 ms), F2 (1.5 s)
    // behind a holder get the lock's TTL + 1.5 s, + 500 ms, + 1.5 s; each ferrisson try that
    // gives up brings the timeouts behind it closer by its own wait.
    let server = RedisServer::spawn();
    let url = server.url();
    let name = unique_name("fair-try-wait");
    let keys = Keys::of(&name);
    let client = client(&url).await;
    let holder = FairLock::new(&client, &name).unwrap().lock().await.unwrap();
    let mut con = server.connection();
    let wait = Duration::from_millis(1500);
    let try_lock = |client: Client| {
        let name = name.clone();
        tokio::spawn(async move {
            let lock = FairLock::new(&client, &name).unwrap();
            let got = lock
                .try_lock_with(ferrisson::AcquireOptions::new().with_wait(wait))
                .await
                .unwrap();
            assert!(got.is_none(), "the holder keeps the lock");
        })
    };
    let queued_as = |con: &mut redis::Connection, n: usize| {
        let waiters = queued(con, &keys);
        assert_eq!(waiters.len(), n, "{waiters:?}");
        waiters[n - 1].clone()
    };
    let f1_task = try_lock(common::client(&url).await);
    eventually(Duration::from_secs(5), "F1 queues", || {
        let len = queued(&mut con, &keys).len();
        async move { len == 1 }
    })
    .await;
    let f1 = queued_as(&mut con, 1);
    let (s, us): (i64, i64) = redis::cmd("TIME").query(&mut con).unwrap();
    let now = s * 1000 + us / 1000;
    let pttl: i64 = redis::cmd("PTTL").arg(&name).query(&mut con).unwrap();
    let t1 = timeout_of(&mut con, &keys, &f1).unwrap();
    let ahead = t1 - now - pttl;
    assert!(
        (1000..=1600).contains(&ahead),
        "F1's timeout is the lock's TTL + its wait: {ahead} ms past the TTL"
    );
    // Redisson's tryLock with a 500 ms wait.
    let r1 = format!("redisson-{}:1", uuid_like(1));
    let ttl: Option<i64> = redisson_script(4, REDISSON_ACQUIRE)
        .key(&keys.lock)
        .key(&keys.queue)
        .key(&keys.timeouts)
        .arg(REDISSON_LEASE_MS)
        .arg(&r1)
        .arg(500)
        .arg(wall_ms())
        .invoke(&mut con)
        .unwrap();
    assert!(ttl.is_some(), "Redisson's try queues");
    let f2_task = try_lock(common::client(&url).await);
    eventually(Duration::from_secs(5), "F2 queues", || {
        let len = queued(&mut con, &keys).len();
        async move { len == 3 }
    })
    .await;
    let f2 = queued_as(&mut con, 3);
    let (t1, tr, t2) = (
        timeout_of(&mut con, &keys, &f1),
        timeout_of(&mut con, &keys, &r1).unwrap(),
        timeout_of(&mut con, &keys, &f2).unwrap(),
    );
    if let Some(t1) = t1 {
        assert_eq!(tr - t1, 500, "R1 steps by its 500 ms wait");
    }
    assert_eq!(t2 - tr, 1500, "F2 steps by its 1.5 s wait");
    // Both ferrisson tries give up; F1 leaving brought R1 (and F2) a 1.5 s closer.
    join_within(
        Duration::from_secs(10),
        "both tries give up",
        vec![f1_task, f2_task],
    )
    .await;
    assert_eq!(queued(&mut con, &keys), std::slice::from_ref(&r1));
    let left = timeout_of(&mut con, &keys, &r1).unwrap();
    assert_eq!(tr - left, 1500, "F1 left from ahead of R1");
    holder.unlock().await.unwrap();
}
