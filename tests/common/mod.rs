//! Helpers shared by the integration tests. Every test talks to a real `redis-server`.
#![allow(dead_code, unused_imports, clippy::unwrap_used, clippy::panic)]

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use ferrisson::{Client, ClientConfig};
pub use ferrisson_testkit::{RedisServer, TestRedis, fenced_code, marked_section, unique_name};

pub mod every_kind;
pub mod frozen;

/// A client of `url` with the given watchdog lease (waits kept off its record, as
/// [`client`]'s).
pub async fn client_with_lease(url: &str, lease: Duration) -> Client {
    Client::with_config(
        ClientConfig::new(url)
            .with_lease(lease)
            .with_wait_record_delay(Duration::MAX),
    )
    .await
    .unwrap_or_else(|e| panic!("connecting to {url}: {e}"))
}

/// A client of `url` with default settings, but for its waits, which it keeps off its record:
/// the tests that count a synchronizer's calls count them alone, however long a waiter
/// waits on a loaded machine (a wait that lasts a second is written into the client's record,
/// and taken out when it ends: `tests/client/waits.rs`).
pub async fn client(url: &str) -> Client {
    Client::with_config(ClientConfig::new(url).with_wait_record_delay(Duration::MAX))
        .await
        .unwrap_or_else(|e| panic!("connecting to {url}: {e}"))
}

/// The waits in the client record of `client` (its `wait:` fields: waits that lasted,
/// docs/protocol.md "[ext] Waits on record").
pub fn recorded_waits(con: &mut redis::Connection, client: &Client) -> Vec<String> {
    let tag: String = client.id().replace('-', "").chars().take(16).collect();
    let fields: HashMap<String, String> = redis::cmd("HGETALL")
        .arg(format!("ferrisson_client:{tag}"))
        .query(con)
        .unwrap();
    fields
        .into_keys()
        .filter(|f| f.starts_with("wait:"))
        .collect()
}

/// Polls `check` until it returns true or `within` passes; panics with `what` then.
pub async fn eventually<F, Fut>(within: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if check().await {
            return;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("not within {within:?}: {what}");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The name libtest knows the test `test` of module `module` (its `module_path!()`) by: the
/// module's path inside its test binary (the area's `main.rs` is the crate), then the test's
/// own name. A worker process started with `--exact` needs all of it.
pub fn test_name(module: &str, test: &str) -> String {
    match module.split_once("::") {
        Some((_, path)) => format!("{path}::{test}"),
        None => test.to_owned(),
    }
}

pub use ferrisson_testkit::command_calls;

/// Calls of `command` between two snapshots.
pub use ferrisson_testkit::calls_between as delta;

/// Connections with at least one channel or pattern subscription (`CLIENT LIST`).
pub fn subscriber_connections(con: &mut redis::Connection) -> usize {
    let list: String = redis::cmd("CLIENT").arg("LIST").query(con).unwrap();
    ferrisson_testkit::count_subscriber_connections(&list)
}

pub use ferrisson_testkit::total_calls;

/// Subscribers of the lean mutex `name`'s release channel (its waiters' clients).
pub fn mutex_waiters_subscribed(con: &mut redis::Connection, name: &str) -> i64 {
    let counts: Vec<(String, i64)> = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(format!("ferrisson_mutex__channel:{{{name}}}"))
        .query(con)
        .unwrap();
    counts.first().map_or(0, |(_, n)| *n)
}

/// `INFO commandstats` once the server has stopped receiving commands (other than `INFO`)
/// for a moment: what clients had in flight has landed.
pub async fn settled_command_calls(con: &mut redis::Connection) -> HashMap<String, u64> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut last = command_calls(con);
    loop {
        tokio::time::sleep(Duration::from_millis(150)).await;
        let now = command_calls(con);
        if total_calls(&now) == total_calls(&last) {
            return now;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("the server never went quiet");
        }
        last = now;
    }
}

/// Waits (10 s at most) until `n` waiters of `client` are parked (asleep until a release, as
/// a local hand-off needs them: a waiter trying right now cannot be handed anything, and a busy
/// machine may keep one trying a while), then until the server has gone quiet, then for the
/// waiters again; returns the quiet server's command counts, the `before` of a hand-off's
/// command deltas.
pub async fn parked_then_settled(
    client: &ferrisson::Client,
    n: usize,
    con: &mut redis::Connection,
) -> HashMap<String, u64> {
    let parked = || async { client.parked_waiters() == n };
    let what = format!("{n} waiters parked");
    eventually(Duration::from_secs(10), &what, parked).await;
    let settled = settled_command_calls(con).await;
    eventually(Duration::from_secs(10), &what, parked).await;
    settled
}

/// Awaits every task, failing with `what` if they are not all done within `within`.
pub async fn join_within<T>(
    within: Duration,
    what: &str,
    tasks: Vec<tokio::task::JoinHandle<T>>,
) -> Vec<T> {
    let all = futures::future::join_all(tasks);
    match tokio::time::timeout(within, all).await {
        Ok(results) => results.into_iter().map(|r| r.unwrap()).collect(),
        Err(_) => panic!("not within {within:?}: {what}"),
    }
}

/// Drops lock calls at every stage, `rounds` times: each round, every other one with the lock
/// held by `hold`'s guard, `call(i)` runs for `50 µs × i` (before, during or after its acquire
/// script call) and is dropped if not done. Whatever it took must be given back by itself.
pub async fn drop_calls_at_every_stage<H, HF, C, CF, T>(rounds: u64, mut hold: H, mut call: C)
where
    H: FnMut() -> HF,
    HF: Future<Output = ferrisson::core::HoldGuard>,
    C: FnMut(u64) -> CF,
    CF: Future<Output = T>,
{
    for i in 0..rounds {
        let holder = if i % 2 == 0 { Some(hold().await) } else { None };
        let _ = tokio::time::timeout(Duration::from_micros(50 * i), call(i)).await;
        if let Some(holder) = holder {
            holder.unlock().await.unwrap();
        }
    }
}

/// Waits (10 s at most) until `n` waiters are queued on the fair lock `lock`.
pub async fn wait_queue_length(lock: &ferrisson_fair_lock::FairLock, n: usize) {
    eventually(
        Duration::from_secs(10),
        &format!("{n} waiters queued"),
        || async { lock.queue_length().await.unwrap() == n },
    )
    .await;
}

/// Wall-clock milliseconds since the Unix epoch (processes on this machine share the clock).
pub fn wall_ms() -> u64 {
    u64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

/// The keys matching `pattern` left without a TTL, but for those the layout keeps on purpose:
/// the fencing counters (which must outlive every hold) and a semaphore's epoch (kept as a
/// counter that permits taken before a delete are checked against).
pub fn lasting_keys(con: &mut redis::Connection, pattern: &str) -> Vec<String> {
    let keys: Vec<String> = redis::cmd("KEYS").arg(pattern).query(con).unwrap();
    keys.into_iter()
        .filter(|key| {
            !(key.starts_with("redisson_lock_token:")
                || key.starts_with("ferrisson_mutex_token:")
                || key.ends_with(":epoch"))
        })
        .filter(|key| redis::cmd("PTTL").arg(key).query::<i64>(con).unwrap() == -1)
        .collect()
}
