//! Waiters behind another Redlock client's hold, whose release publishes nothing: Redis tells
//! them of the release through server-assisted invalidation (`CLIENT TRACKING`), so they send
//! nothing while they wait; through a lost subscriber connection, a command connection lost
//! unseen (the net), a user without the rights, and with the feature off.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common;

use std::time::Duration;

use common::{
    RedisServer, delta, eventually, mutex_waiters_subscribed, settled_command_calls, unique_name,
};
use ferrisson::{AcquireOptions, Client, ClientConfig, HoldGuard, Lock, Mutex, Result};
use tokio::task::JoinHandle;

const SOON: Duration = Duration::from_secs(10);

/// How long a peer holds while the waiter is watched: several of the 100–200 ms re-checks an
/// untracked waiter makes, well under the tracked waiter's net (3 s).
const WATCHED: Duration = Duration::from_millis(700);

/// rslock's, redsync's and redis-py's release: delete if the value is the caller's token.
const PEER_RELEASE: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0";

/// A peer's token (no ferrisson owner): what rslock, node-redlock or redis-py would write.
const PEER_TOKEN: &str = "3f2a9c1be0d84f51a7c6d2e98b14a0ce";

fn peer_take(con: &mut redis::Connection, name: &str) {
    let set: Option<String> = redis::cmd("SET")
        .arg(name)
        .arg(PEER_TOKEN)
        .arg("NX")
        .arg("PX")
        .arg(120_000)
        .query(con)
        .unwrap();
    assert!(set.is_some(), "the peer took {name}");
}

/// The peer's release, as `EVAL` (so that the waiter's `EVALSHA`s are counted alone).
fn peer_release(con: &mut redis::Connection, name: &str) {
    let deleted: i64 = redis::cmd("EVAL")
        .arg(PEER_RELEASE)
        .arg(1)
        .arg(name)
        .arg(PEER_TOKEN)
        .query(con)
        .unwrap();
    assert_eq!(deleted, 1, "the peer held {name}");
}

fn waiter(mutex: &Mutex) -> JoinHandle<Result<Option<HoldGuard>>> {
    let mutex = mutex.clone();
    tokio::spawn(async move {
        mutex
            .try_lock_with(AcquireOptions::new().with_wait(Duration::from_secs(60)))
            .await
    })
}

async fn taken(waiter: JoinHandle<Result<Option<HoldGuard>>>) -> HoldGuard {
    tokio::time::timeout(SOON, waiter)
        .await
        .expect("in long before the peer's lease (120 s) would have ended")
        .unwrap()
        .unwrap()
        .expect("taken")
}

/// A client that keeps no record: nothing but the test's own calls runs on the server while
/// its commands are counted.
async fn quiet_client(server: &RedisServer) -> Client {
    Client::with_config(ClientConfig::new(server.url()).with_client_record(false))
        .await
        .unwrap()
}

/// A waiter of a fresh client on a server of its own, behind a peer's hold, whose try has
/// armed tracking.
struct Scene {
    server: RedisServer,
    client: Client,
    name: String,
    con: redis::Connection,
    waiting: JoinHandle<Result<Option<HoldGuard>>>,
}

async fn tracked_waiter(prefix: &str) -> Scene {
    let server = RedisServer::spawn();
    let client = quiet_client(&server).await;
    let name = unique_name(prefix);
    let mutex = Mutex::new(&client, &name).unwrap();
    let mut con = server.connection();
    peer_take(&mut con, &name);
    let waiting = waiter(&mutex);
    armed(&client, 1).await;
    Scene {
        server,
        client,
        name,
        con,
        waiting,
    }
}

/// `CLIENT KILL TYPE <kind>` of every connection but the caller's.
fn kill(con: &mut redis::Connection, kind: &str) -> i64 {
    redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg(kind)
        .arg("SKIPME")
        .arg("yes")
        .query(con)
        .unwrap()
}

/// Until the client's waiters have armed tracking `n` times in all.
async fn armed(client: &Client, n: u64) {
    eventually(SOON, "the waiter armed tracking", || {
        std::future::ready(client.tracking_stats().armed >= n)
    })
    .await;
}

/// The waiter arms tracking with one try and then sends nothing until the peer releases; the
/// release's invalidation wakes it, and it gets in with one more try. Behind a ferrisson
/// holder, whose release publishes, nothing is armed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_behind_another_redlock_client_sends_nothing_until_told_of_the_release() {
    let Scene {
        server,
        client: a,
        name,
        mut con,
        waiting,
    } = tracked_waiter("tracked").await;
    assert!(a.tracking_stats().available, "{:?}", a.tracking_stats());
    let before = settled_command_calls(&mut con).await;
    tokio::time::sleep(WATCHED).await;
    let during = settled_command_calls(&mut con).await;
    assert_eq!(
        delta(&before, &during, "evalsha") + delta(&before, &during, "set"),
        0,
        "no try while the peer held"
    );
    peer_release(&mut con, &name);
    let guard = taken(waiting).await;
    let after = settled_command_calls(&mut con).await;
    assert_eq!(
        delta(&during, &after, "evalsha"),
        1,
        "one try, woken by the invalidation"
    );
    let stats = a.tracking_stats();
    assert!(stats.invalidations >= 1, "{stats:?}");
    assert_eq!(stats.missed, 0, "{stats:?}");

    // Behind a ferrisson holder: marked, woken by its release's message, nothing armed.
    let b = quiet_client(&server).await;
    let theirs = Mutex::new(&b, &name).unwrap();
    let waiting = {
        let theirs = theirs.clone();
        tokio::spawn(async move { theirs.lock().await })
    };
    eventually(SOON, "the ferrisson waiter subscribed", || {
        std::future::ready(mutex_waiters_subscribed(&mut con, &name) >= 1)
    })
    .await;
    guard.unlock().await.unwrap();
    let guard = tokio::time::timeout(SOON, waiting)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(b.tracking_stats().armed, 0, "{:?}", b.tracking_stats());
    guard.unlock().await.unwrap();
}

/// The subscriber connection is killed while a tracked waiter waits: it comes back with a new
/// id, the waiter tries again and arms tracking for that id, and the peer's release still
/// wakes it (no wake-up missed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tracked_waiter_is_told_through_a_new_subscriber_connection() {
    let Scene {
        server: _server,
        client: a,
        name,
        mut con,
        waiting,
    } = tracked_waiter("tracked-resubscribed").await;
    assert!(kill(&mut con, "pubsub") >= 1);
    // Woken by the reconnect, it tries again and arms for the new connection.
    armed(&a, 2).await;
    eventually(SOON, "the waiter subscribed again", || {
        std::future::ready(mutex_waiters_subscribed(&mut con, &name) == 1)
    })
    .await;
    let before = settled_command_calls(&mut con).await;
    tokio::time::sleep(WATCHED).await;
    peer_release(&mut con, &name);
    taken(waiting).await.unlock().await.unwrap();
    let after = settled_command_calls(&mut con).await;
    assert_eq!(
        delta(&before, &after, "evalsha"),
        2,
        "the try that got in and the release"
    );
    assert_eq!(a.tracking_stats().missed, 0, "{:?}", a.tracking_stats());
}

/// The command connection is killed while a tracked waiter waits, and nothing the client sends
/// shows it: the server forgot the tracking, so the peer's release tells nobody. The waiter's
/// net (`TRACKED_RECHECK`) lets it in, and counts the missed wake-up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tracked_waiter_whose_tracking_was_lost_unseen_gets_in_by_its_net() {
    let Scene {
        server: _server,
        client: a,
        name,
        mut con,
        waiting,
    } = tracked_waiter("tracked-lost").await;
    kill(&mut con, "normal");
    peer_release(&mut con, &name);
    taken(waiting).await.unlock().await.unwrap();
    assert_eq!(a.tracking_stats().missed, 1, "{:?}", a.tracking_stats());
}

/// A user without `client|tracking`, and a client with tracked waits off: nothing is armed,
/// and waiters get in after a peer's release by their re-checks, as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_rights_or_with_tracked_waits_off_waiters_re_check() {
    let server = RedisServer::spawn();
    let mut con = server.connection();
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("untracked")
        .arg("on")
        .arg(">secret")
        .arg("~*")
        .arg("&*")
        .arg("+@all")
        .arg("-client|tracking")
        .query(&mut con)
        .unwrap();
    let limited = Client::connect(&format!(
        "redis://untracked:secret@127.0.0.1:{}",
        server.port()
    ))
    .await
    .unwrap();
    let off = Client::with_config(ClientConfig::new(server.url()).with_tracked_waits(false))
        .await
        .unwrap();
    assert!(!off.tracking_stats().available);
    for client in [&limited, &off] {
        let name = unique_name("untracked");
        let mutex = Mutex::new(client, &name).unwrap();
        peer_take(&mut con, &name);
        let waiting = waiter(&mutex);
        eventually(SOON, "the waiter subscribed", || {
            std::future::ready(mutex_waiters_subscribed(&mut con, &name) == 1)
        })
        .await;
        peer_release(&mut con, &name);
        taken(waiting).await.unlock().await.unwrap();
        let stats = client.tracking_stats();
        assert!(!stats.available && stats.armed == 0, "{stats:?}");
    }
}
