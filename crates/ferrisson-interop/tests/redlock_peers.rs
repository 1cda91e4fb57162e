//! The lean mutex and the Redlock ecosystem on one Redis and one name: the `rslock` crate (in
//! this process), redis-py's `Lock` (PyPI `redis`) and npm `redlock`, each driven by its own
//! runtime through the scripts under `peers/`. None of them and the mutex ever hold at
//! once, in either order and under contention from all of them; a ferrisson waiter gets in after
//! a peer's release (which publishes nothing) long before the peer's lease would end, told of
//! it by Redis (tracking), with no try while the peer holds.
//!
//! The Python and Node peers are installed on first use into the target dir by
//! `.ci/redlock-peers.sh` (which `.ci/run` runs up front): python3 with venv and pip, node with
//! npm, and PyPI and the npm registry must be reachable.
#![allow(clippy::unwrap_used, clippy::panic, clippy::expect_used)]

#[path = "../../../tests/common/mod.rs"]
mod common;

use std::future::Future;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;

use common::{TestRedis, client, eventually, join_within, mutex_waiters_subscribed, unique_name};
use ferrisson::{AcquireOptions, Lock, Mutex};
use futures::future::BoxFuture;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::task::JoinHandle;

const SOON: Duration = Duration::from_secs(20);
/// The peers' lease while a ferrisson waiter waits for their release: far longer than the
/// wait the test allows, so only a re-check can let the waiter in.
const LONG_LEASE_MS: u64 = 120_000;

/// Where the peers are installed, once per target dir (every test process runs the idempotent
/// installer under a file lock: nextest runs each test in a process of its own).
fn peers_dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("redlock-peers");
        std::fs::create_dir_all(&dir).unwrap();
        let lock = std::fs::File::create(dir.join(".install.lock")).unwrap();
        lock.lock().unwrap();
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.ci/redlock-peers.sh");
        let out = std::process::Command::new("bash")
            .arg(&script)
            .arg(&dir)
            .output()
            .unwrap_or_else(|e| panic!("running {}: {e}", script.display()));
        assert!(
            out.status.success(),
            "installing the Redlock peers (redis-py, npm redlock) failed; they need python3 with \
             venv and pip, node with npm, and PyPI and the npm registry (.ci/run installs them, \
             or run `.ci/redlock-peers.sh {}`): {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        drop(lock);
        dir
    })
}

#[derive(Debug, Clone, Copy)]
enum Peer {
    RedisPy,
    NodeRedlock,
}

impl Peer {
    fn command(self) -> Command {
        let dir = peers_dir();
        let mut cmd = match self {
            Peer::RedisPy => {
                let mut cmd = Command::new(dir.join("python/venv/bin/python"));
                cmd.arg(dir.join("python/redlock_peer.py"));
                cmd
            }
            Peer::NodeRedlock => {
                let mut cmd = Command::new("node");
                cmd.arg(dir.join("node/redlock_peer.mjs"));
                cmd
            }
        };
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        cmd
    }
}

/// A peer process, told what to do by its arguments and a line on stdin.
struct PeerProcess {
    peer: Peer,
    _child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
}

impl PeerProcess {
    fn start(peer: Peer, args: &[&str]) -> Self {
        let mut child = peer
            .command()
            .args(args)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {peer:?}: {e}"));
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        Self {
            peer,
            _child: child,
            stdin,
            stdout,
        }
    }

    async fn line(&mut self) -> String {
        match tokio::time::timeout(Duration::from_secs(120), self.stdout.next_line()).await {
            Ok(Ok(Some(line))) => line,
            other => panic!("{:?} printed nothing more: {other:?}", self.peer),
        }
    }

    async fn proceed(&mut self) {
        self.stdin.write_all(b"go\n").await.unwrap();
        self.stdin.flush().await.unwrap();
    }
}

/// A peer's hold, whoever the peer is.
enum Hold {
    Process(Box<PeerProcess>),
    Rslock(rslock::LockManager, rslock::Lock),
}

impl Hold {
    async fn release(self) {
        match self {
            Hold::Process(mut p) => {
                p.proceed().await;
                assert_eq!(p.line().await, "released");
            }
            Hold::Rslock(manager, lock) => manager.unlock(&lock).await,
        }
    }
}

/// Who takes the lock beside the mutex.
#[derive(Debug, Clone, Copy)]
enum AnyPeer {
    Rslock,
    Process(Peer),
}

const PEERS: [AnyPeer; 3] = [
    AnyPeer::Rslock,
    AnyPeer::Process(Peer::RedisPy),
    AnyPeer::Process(Peer::NodeRedlock),
];

impl AnyPeer {
    /// Takes `name` with `lease_ms`, waiting up to `wait` (zero: one try); `None`: busy.
    async fn take(self, url: &str, name: &str, wait: Duration, lease_ms: u64) -> Option<Hold> {
        match self {
            AnyPeer::Rslock => {
                let mut manager = rslock::LockManager::new(vec![url.to_owned()]);
                let tries = u32::try_from(wait.as_millis() / 10).unwrap().max(1);
                manager.set_retry(tries, Duration::from_millis(10));
                let lock = manager
                    .lock(name.as_bytes(), Duration::from_millis(lease_ms))
                    .await
                    .ok()?;
                Some(Hold::Rslock(manager, lock))
            }
            AnyPeer::Process(peer) => {
                let wait_s = wait.as_secs_f64().to_string();
                let lease = lease_ms.to_string();
                let mut p = PeerProcess::start(peer, &["take", url, name, &wait_s, &lease]);
                match p.line().await.as_str() {
                    "held" => Some(Hold::Process(Box::new(p))),
                    "busy" => None,
                    other => panic!("{peer:?} said {other}"),
                }
            }
        }
    }
}

/// Each peer is refused while the mutex is held and gets it once released (waiting for it);
/// the mutex is refused while the peer holds and gets it once the peer releases (a ferrisson
/// waiter, woken by the invalidation its tracked try armed: the peer publishes nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_peer_and_the_mutex_exclude_each_other_in_both_orders() {
    let redis = TestRedis::any();
    let url = redis.url();
    let a = client(&url).await;
    let mut con = redis.connection();
    for peer in PEERS {
        let name = unique_name("redlock-peers-order");
        let mutex = Mutex::new(&a, &name).unwrap();

        // Mutex first: the peer is refused, then waits and gets in on the release.
        let ours = mutex.lock().await.unwrap();
        assert!(
            peer.take(&url, &name, Duration::ZERO, 5_000)
                .await
                .is_none(),
            "{peer:?} took a held mutex"
        );
        let waiting = tokio::spawn({
            let (url, name) = (url.clone(), name.clone());
            async move { peer.take(&url, &name, SOON, LONG_LEASE_MS).await }
        });
        // The peer is trying (a ferrisson release leaves nothing for it to miss).
        tokio::time::sleep(Duration::from_millis(300)).await;
        ours.unlock().await.unwrap();
        let theirs = tokio::time::timeout(SOON * 2, waiting)
            .await
            .unwrap()
            .unwrap()
            .unwrap_or_else(|| panic!("{peer:?} never got the released mutex"));

        // Peer first: the mutex is refused, and a waiter gets in on the peer's release.
        assert!(mutex.try_lock().await.unwrap().is_none(), "{peer:?}");
        let waiter = tokio::spawn({
            let mutex = mutex.clone();
            async move {
                mutex
                    .try_lock_with(AcquireOptions::new().with_wait(Duration::from_secs(100)))
                    .await
            }
        });
        eventually(SOON, "the ferrisson waiter subscribed", || {
            std::future::ready(mutex_waiters_subscribed(&mut con, &name) == 1)
        })
        .await;
        // Behind the peer's token it arms tracking, and then tries no more (each try would
        // arm again) until the peer's release is told: no polling.
        let armed = a.tracking_stats().armed;
        eventually(SOON, "the ferrisson waiter armed tracking", || {
            std::future::ready(a.tracking_stats().armed > armed)
        })
        .await;
        let (armed, invalidations) = (a.tracking_stats().armed, a.tracking_stats().invalidations);
        tokio::time::sleep(Duration::from_millis(700)).await;
        assert_eq!(
            a.tracking_stats().armed,
            armed,
            "{peer:?}: a try while the peer held"
        );
        theirs.release().await;
        let ours = tokio::time::timeout(SOON, waiter)
            .await
            .unwrap_or_else(|_| {
                panic!("{peer:?} released, and the waiter did not get in long before the lease")
            })
            .unwrap()
            .unwrap()
            .expect("taken");
        let stats = a.tracking_stats();
        assert!(stats.invalidations > invalidations, "{peer:?}: {stats:?}");
        assert_eq!(
            stats.missed, 0,
            "{peer:?}: woken by the release, not the net"
        );
        ours.unlock().await.unwrap();
    }
}

/// What a contending peer process prints: its rounds and the holds that had company.
fn contended(line: &str) -> (u64, u64) {
    let value: serde_json::Value =
        serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
    let field = |f: &str| {
        value[f]
            .as_u64()
            .unwrap_or_else(|| panic!("no {f} in {line}"))
    };
    (field("rounds"), field("overlaps"))
}

/// Rounds each contender takes: enough for every client to meet every other in the queue.
const ROUNDS: u64 = 25;

/// One hold, checked for company: `NAME:inside` goes 0 → 1 → 0 when nobody else holds.
async fn checked_hold(con: &mut redis::aio::MultiplexedConnection, inside: &str) -> u64 {
    let n: i64 = redis::cmd("INCR")
        .arg(inside)
        .query_async(con)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(2)).await;
    let _: i64 = redis::cmd("DECR")
        .arg(inside)
        .query_async(con)
        .await
        .unwrap();
    u64::from(n != 1)
}

/// What a contender's take hands back: the hold's fencing token, if any, and its release.
type Taken = (Option<u64>, BoxFuture<'static, ()>);

/// A contender task: takes the lock (`take`), checks the hold for company in `inside` (over a
/// connection of its own from `redis`), releases, for as long as `more(rounds done)` says;
/// fenced tokens must grow. It ends with how many of its holds had company.
async fn contender<F, Fut>(
    redis: &redis::Client,
    inside: &str,
    more: impl Fn(u64) -> bool + Send + 'static,
    mut take: F,
) -> JoinHandle<u64>
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = Taken> + Send,
{
    let mut con = redis.get_multiplexed_async_connection().await.unwrap();
    let inside = inside.to_owned();
    tokio::spawn(async move {
        let (mut overlaps, mut last, mut round) = (0, None, 0);
        while more(round) {
            round += 1;
            let (token, release) = take().await;
            if token.is_some() {
                assert!(token > last, "fenced tokens grow: {token:?} after {last:?}");
                last = token;
            }
            overlaps += checked_hold(&mut con, &inside).await;
            release.await;
        }
        overlaps
    })
}

/// A taker of `mutex` for [`contender`].
fn mutex_taker(mutex: Mutex) -> impl FnMut() -> BoxFuture<'static, Taken> + Send + 'static {
    move || {
        let mutex = mutex.clone();
        Box::pin(async move {
            let guard = mutex.lock().await.unwrap();
            let token = guard.token();
            let release: BoxFuture<'static, ()> =
                Box::pin(async move { guard.unlock().await.unwrap() });
            (token, release)
        })
    }
}

/// A taker of rslock's lock on `name` (on every server of `manager`) for [`contender`].
fn rslock_taker(
    manager: rslock::LockManager,
    name: String,
) -> impl FnMut() -> BoxFuture<'static, Taken> + Send + 'static {
    move || {
        let (manager, name) = (manager.clone(), name.clone());
        Box::pin(async move {
            let lock = manager
                .acquire_no_guard(name.as_bytes(), Duration::from_secs(10))
                .await
                .unwrap();
            let release: BoxFuture<'static, ()> =
                Box::pin(async move { manager.unlock(&lock).await });
            (None, release)
        })
    }
}

/// Every client at once on one name: two ferrisson clients (plain and fenced handles, local
/// waiters and hand-offs), rslock in two tasks, redis-py's `Lock` and npm `redlock` in processes
/// of their own. No hold ever has company, and everyone finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_two_hold_at_once_under_contention_from_every_client() {
    let redis = TestRedis::any();
    let url = redis.url();
    let name = unique_name("redlock-peers-contended");
    let inside = format!("{name}:inside");
    let redis_client = redis::Client::open(url.as_str()).unwrap();

    let mut processes: Vec<_> = [Peer::RedisPy, Peer::NodeRedlock]
        .into_iter()
        .map(|peer| {
            let rounds = ROUNDS.to_string();
            PeerProcess::start(peer, &["contend", &url, &name, &rounds])
        })
        .collect();
    // Everyone starts together: the processes are connected first.
    for p in &mut processes {
        assert_eq!(p.line().await, "ready", "{:?}", p.peer);
    }
    // The in-process contenders go on, past their own rounds, until the processes are done.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let more = |stop: &std::sync::atomic::AtomicBool, round: u64| {
        round < ROUNDS || !stop.load(std::sync::atomic::Ordering::Relaxed)
    };

    let mut tasks = Vec::new();
    for fenced in [false, true] {
        let c = client(&url).await;
        let mutex = if fenced {
            Mutex::fenced(&c, &name).unwrap()
        } else {
            Mutex::new(&c, &name).unwrap()
        };
        for _ in 0..2 {
            let stop = stop.clone();
            let more = move |round| more(&stop, round);
            tasks.push(contender(&redis_client, &inside, more, mutex_taker(mutex.clone())).await);
        }
    }
    for _ in 0..2 {
        let stop = stop.clone();
        let more = move |round| more(&stop, round);
        let manager = rslock::LockManager::new(vec![url.clone()]);
        tasks.push(
            contender(
                &redis_client,
                &inside,
                more,
                rslock_taker(manager, name.clone()),
            )
            .await,
        );
    }

    for p in &mut processes {
        let (rounds, overlaps) = contended(&p.line().await);
        assert_eq!(rounds, ROUNDS, "{:?}", p.peer);
        assert_eq!(overlaps, 0, "a {:?} hold had company", p.peer);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let ours: u64 = join_within(
        Duration::from_secs(240),
        "the ferrisson and rslock contenders",
        tasks,
    )
    .await
    .into_iter()
    .sum();
    assert_eq!(ours, 0, "a ferrisson or rslock hold had company");
}

/// A RedLock over lean mutexes on three servers and rslock's Redlock over the same three: each
/// refused while the other holds, a waiting RedLock let in after rslock's release (which
/// publishes nothing: its watch re-checks), and under contention from both no hold with company.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redlock_over_mutexes_and_rslock_on_three_servers_exclude_each_other() {
    use ferrisson::{AnyLock, RedLock};
    let servers: Vec<_> = (0..3).map(|_| common::RedisServer::spawn()).collect();
    let urls: Vec<String> = servers.iter().map(|s| s.url()).collect();
    let name = unique_name("redlock-peers-red");
    let mut clients = Vec::new();
    for url in &urls {
        clients.push(client(url).await);
    }
    let red = |fenced: bool| {
        let locks = clients
            .iter()
            .map(|c| {
                let mutex = if fenced {
                    Mutex::fenced(c, &name)
                } else {
                    Mutex::new(c, &name)
                };
                Box::new(mutex.unwrap()) as Box<dyn AnyLock>
            })
            .collect();
        RedLock::new(locks).unwrap()
    };
    let ours = red(false);
    let mut once = rslock::LockManager::new(urls.clone());
    once.set_retry(1, Duration::from_millis(10));
    let lease = Duration::from_millis(LONG_LEASE_MS);

    let guard = ours.lock().await.unwrap();
    assert_eq!(guard.holds().len(), 3);
    assert!(
        once.lock(name.as_bytes(), lease).await.is_err(),
        "rslock got in"
    );
    guard.unlock().await.unwrap();
    let theirs = once.lock(name.as_bytes(), lease).await.expect("free");
    assert!(
        ours.try_lock().await.unwrap().is_none(),
        "the RedLock got in"
    );
    let waiter = tokio::spawn({
        let ours = ours.clone();
        async move {
            ours.try_lock_with(AcquireOptions::new().with_wait(Duration::from_secs(100)))
                .await
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    once.unlock(&theirs).await;
    tokio::time::timeout(SOON, waiter)
        .await
        .expect("let in long before rslock's lease would have ended")
        .unwrap()
        .unwrap()
        .expect("taken")
        .unlock()
        .await
        .unwrap();

    // Both at once, fenced RedLocks among them; company is counted on the first server.
    let inside = format!("{name}:inside");
    let redis_client = redis::Client::open(urls[0].as_str()).unwrap();
    let mut tasks = Vec::new();
    let rounds = |round| round < ROUNDS;
    for fenced in [false, true] {
        let red = red(fenced);
        let take = move || {
            let red = red.clone();
            Box::pin(async move {
                let guard = red.lock().await.unwrap();
                let token = guard.token();
                let release: BoxFuture<'static, ()> =
                    Box::pin(async move { guard.unlock().await.unwrap() });
                (token, release)
            }) as BoxFuture<'static, Taken>
        };
        tasks.push(contender(&redis_client, &inside, rounds, take).await);
    }
    for _ in 0..2 {
        let manager = rslock::LockManager::new(urls.clone());
        tasks.push(
            contender(
                &redis_client,
                &inside,
                rounds,
                rslock_taker(manager, name.clone()),
            )
            .await,
        );
    }
    let overlaps: u64 = join_within(Duration::from_secs(240), "every contender", tasks)
        .await
        .into_iter()
        .sum();
    assert_eq!(overlaps, 0, "a hold had company");
}
