//! The `ferrisson` tool end to end, against real servers (a standalone one and the local
//! cluster), with other processes that hold, wait and die. Those processes are this test
//! binary again, running the ignored `worker` test with a role in its environment.
#![allow(clippy::unwrap_used, clippy::panic, clippy::print_stdout)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ferrisson::{
    AcquireOptions, Client, ClientConfig, CountDownLatch, ExpirableSemaphore, FairLock, Lock,
    Mutex, RateLimiter, RateType, ReadWriteLock, ReentrantLock, Semaphore,
};
use ferrisson_testkit::{RedisCluster, RedisSentinel, RedisServer, unique_name};
use serde_json::Value;

const SOON: Duration = Duration::from_secs(20);

/// Runs the tool against `url` with `args`.
fn ferrisson(url: &str, args: &[&str]) -> Output {
    ferrisson_with(url, args, &[])
}

fn ferrisson_with(url: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ferrisson"));
    cmd.args(args)
        .env("REDIS_URL", url)
        .env_remove("REDIS_PASSWORD")
        .env_remove("REDISCLI_AUTH")
        .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The tool's `show --json` of `name`.
fn show_json(url: &str, name: &str) -> Value {
    let out = ferrisson(url, &["show", name, "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A runtime of the test's own and a client of `url` on it, for the synchronizers a test
/// changes while the tool looks.
fn runtime_and_client(url: &str) -> (tokio::runtime::Runtime, Client) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let client = runtime.block_on(Client::connect(url)).unwrap();
    (runtime, client)
}

/// The tool connected and found nothing stored under the name: exit code 2, and it says so.
fn assert_nothing_stored(out: &Output) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("nothing is stored under"), "{err}");
}

/// Polls `check` until it holds or `SOON` passes.
fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now()
        .checked_add(SOON)
        .expect("a test's patience fits the clock");
    while !check() {
        assert!(Instant::now() < deadline, "not within {SOON:?}: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Another process: this binary running `worker` as `role` on `url` and `name`, its stdout
/// lines on a channel.
struct Worker {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Worker {
    fn start(role: &str, url: &str, name: &str) -> Self {
        let mut child = ferrisson_testkit::rerun_test_as_process(
            "worker",
            &[
                ("WORKER_ROLE", role),
                ("WORKER_URL", url),
                ("WORKER_NAME", name),
            ],
        )
        .spawn()
        .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Self { child, lines }
    }

    /// Waits for a line starting with `prefix` (libtest may print the test's name first).
    fn expect(&self, prefix: &str) -> String {
        let deadline = Instant::now()
            .checked_add(SOON)
            .expect("a test's patience fits the clock");
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("the worker never printed `{prefix}`"));
            if let Some(at) = line.find(prefix) {
                return line[at..].to_owned();
            }
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills it as a crash would: nothing released.
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Not a test: the other processes' body (see [`Worker`]).
#[test]
#[ignore = "run by the other tests as a separate process"]
fn worker() {
    let Some([role, url, name]) =
        ferrisson_testkit::worker_env(["WORKER_ROLE", "WORKER_URL", "WORKER_NAME"])
    else {
        return;
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async move {
        let config: ClientConfig = url.parse().unwrap();
        let client = Client::with_config(
            config
                .with_app_name(format!("{role}-app"))
                .with_lease(Duration::from_secs(3)),
        )
        .await
        .unwrap();
        let say = |line: String| println!("{line}");
        // Each role holds what it took until the process is killed.
        let mut kept: Vec<Box<dyn std::any::Any + Send>> = Vec::new();
        match role.as_str() {
            "hold-lock" => {
                let guard = ReentrantLock::fenced(&client, &name)
                    .unwrap()
                    .lock()
                    .await
                    .unwrap();
                say(format!("ready {}", guard.owner()));
                kept.push(Box::new(guard));
            }
            "wait-lock" => {
                say("ready".into());
                let guard = ReentrantLock::fenced(&client, &name)
                    .unwrap()
                    .lock()
                    .await
                    .unwrap();
                say(format!("acquired {}", guard.owner()));
                kept.push(Box::new(guard));
            }
            "wait-fair" => {
                say("ready".into());
                let guard = FairLock::new(&client, &name).unwrap().lock().await.unwrap();
                say("acquired".into());
                kept.push(Box::new(guard));
            }
            "hold-everything" => {
                let lock = |kind: &str| format!("{name}:{kind}");
                kept.push(Box::new(
                    FairLock::new(&client, &lock("fair"))
                        .unwrap()
                        .lock()
                        .await
                        .unwrap(),
                ));
                let rw = ReadWriteLock::new(&client, &lock("rw")).unwrap();
                kept.push(Box::new(rw.read_lock().lock().await.unwrap()));
                kept.push(Box::new(
                    Mutex::fenced(&client, &lock("mutex"))
                        .unwrap()
                        .lock()
                        .await
                        .unwrap(),
                ));
                let sem = ExpirableSemaphore::new(&client, &lock("expirable")).unwrap();
                assert!(sem.try_set_permits(3).await.unwrap());
                let permit = sem
                    .acquire_with(AcquireOptions::new().with_lease(Duration::from_secs(60)))
                    .await
                    .unwrap();
                say(format!("permit {}", permit.id()));
                kept.push(Box::new(permit));
                let plain = Semaphore::new(&client, &lock("semaphore")).unwrap();
                assert!(plain.try_set_permits(4).await.unwrap());
                kept.push(Box::new(plain.acquire().await.unwrap()));
                let latch = CountDownLatch::new(&client, &lock("latch")).unwrap();
                assert!(latch.try_set_count(2).await.unwrap());
                let _ = latch.count_down_once("worker-a").await.unwrap();
                let limiter = RateLimiter::new(&client, &lock("rate")).unwrap();
                assert!(
                    limiter
                        .try_set_rate(RateType::Overall, 10, Duration::from_secs(60))
                        .await
                        .unwrap()
                );
                assert!(limiter.try_acquire(4).await.unwrap());
                say("ready".into());
            }
            other => panic!("no role {other}"),
        }
        std::future::pending::<()>().await;
        drop(kept);
    });
}

#[test]
fn show_names_the_holding_process_and_its_waiter_until_the_holder_dies() {
    let server = RedisServer::spawn();
    let url = server.url();
    let name = unique_name("billing:close");
    let mut holder = Worker::start("hold-lock", &url, &name);
    let owner = holder.expect("ready ")["ready ".len()..].to_owned();
    let waiter = Worker::start("wait-lock", &url, &name);
    waiter.expect("ready");
    eventually("the waiter subscribes", || {
        show_json(&url, &name)["subscribers"] == 1
    });

    let state = show_json(&url, &name);
    assert_eq!(state["kind"], "lock");
    let h = &state["holders"][0];
    assert_eq!(h["owner"], owner.as_str());
    assert_eq!(
        (h["mode"].as_str(), h["count"].as_u64()),
        (Some("exclusive"), Some(1))
    );
    assert!(h["lease_left_ms"].as_u64().unwrap() <= 3000);
    let c = &h["client"];
    assert_eq!(c["kind"], "ferrisson");
    assert_eq!(c["app"], "hold-lock-app");
    assert_eq!(c["pid"].as_u64(), Some(u64::from(holder.pid())));
    assert!(!c["host"].as_str().unwrap().is_empty());
    assert_eq!(c["client_id"].as_str(), owner.get(..36));
    assert!(state["fencing_token"].as_u64().unwrap() > 0);

    let human = ferrisson(&url, &["show", &name]);
    let text = stdout(&human);
    assert!(text.contains("hold-lock-app on "), "{text}");
    assert!(text.contains(&format!("(pid {})", holder.pid())), "{text}");
    assert!(text.contains("lease "), "{text}");
    assert!(text.contains("1 client connection(s) subscribed"), "{text}");

    // The holder dies: its lease runs out, the waiter gets the lock, and show names it.
    holder.kill();
    waiter.expect("acquired ");
    let state = show_json(&url, &name);
    assert_eq!(state["holders"][0]["client"]["app"], "wait-lock-app");
    assert_eq!(
        state["holders"][0]["client"]["pid"].as_u64(),
        Some(u64::from(waiter.pid()))
    );
    // The dead holder's record ends with its lease.
    let mut con = server.connection();
    let tag = owner[..36].replace('-', "");
    eventually("the dead holder's record expires", || {
        !redis::cmd("EXISTS")
            .arg(format!("ferrisson_client:{}", &tag[..16]))
            .query::<bool>(&mut con)
            .unwrap()
    });
}

/// Starts a process holding one object of every kind under `name:<kind>` and another queued
/// on its fair lock, and checks every field `show --json` gives of them; the processes live
/// on with the returned workers.
fn every_kind_shows_its_holders(url: &str, name: &str) -> [Worker; 2] {
    let holder = Worker::start("hold-everything", url, name);
    let permit = holder.expect("permit ")["permit ".len()..].to_owned();
    holder.expect("ready");
    let queued = Worker::start("wait-fair", url, &format!("{name}:fair"));
    queued.expect("ready");
    let pid = u64::from(holder.pid());
    let key = |kind: &str| format!("{name}:{kind}");
    eventually("the fair waiter queues", || {
        show_json(url, &key("fair"))["queue_length"] == 1
    });

    let fair = show_json(url, &key("fair"));
    assert_eq!(fair["kind"], "fair-lock");
    assert_eq!(fair["holders"][0]["client"]["pid"].as_u64(), Some(pid));
    assert_eq!(fair["holders"][0]["client"]["app"], "hold-everything-app");
    let w = &fair["waiters"][0];
    assert_eq!(w["client"]["pid"].as_u64(), Some(u64::from(queued.pid())));
    assert!(w["timeout_in_ms"].as_u64().unwrap() > 0);

    let rw = show_json(url, &key("rw"));
    assert_eq!(rw["kind"], "rwlock");
    assert_eq!(rw["holders"][0]["mode"], "read");
    assert_eq!(rw["holders"][0]["client"]["pid"].as_u64(), Some(pid));
    assert!(rw["holders"][0]["lease_left_ms"].as_u64().unwrap() <= 3000);

    let mutex = show_json(url, &key("mutex"));
    assert_eq!(mutex["kind"], "mutex");
    assert_eq!(mutex["holders"][0]["client"]["pid"].as_u64(), Some(pid));
    assert!(mutex["fencing_token"].as_u64().is_some());

    let expirable = show_json(url, &key("expirable"));
    assert_eq!(expirable["kind"], "expirable-semaphore");
    let p = &expirable["permits"];
    assert_eq!(
        (p["available"].as_i64(), p["taken"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(p["permits"][0]["id"], permit.as_str());
    assert_eq!(p["permits"][0]["client"]["pid"].as_u64(), Some(pid));
    assert!(p["permits"][0]["lease_left_ms"].as_u64().unwrap() <= 60_000);

    let out = ferrisson(
        url,
        &["show", &key("semaphore"), "--kind", "semaphore", "--json"],
    );
    let semaphore: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(semaphore["permits"]["available"].as_i64(), Some(3));
    assert!(
        semaphore["permits"]["taken"].is_null(),
        "the layout keeps no holders"
    );

    let latch = show_json(url, &key("latch"));
    assert_eq!(latch["kind"], "latch");
    assert_eq!(latch["latch"]["count"].as_i64(), Some(1));
    assert_eq!(latch["latch"]["participants"][0], "worker-a");

    let rate = show_json(url, &key("rate"));
    assert_eq!(rate["kind"], "rate-limiter");
    assert_eq!(rate["rate"]["rate"].as_i64(), Some(10));
    assert_eq!(rate["rate"]["given_in_window"].as_u64(), Some(4));
    assert_eq!(rate["rate"]["available"].as_i64(), Some(6));
    [holder, queued]
}

#[test]
fn show_reads_every_kind_of_another_process_and_a_redisson_holder() {
    let server = RedisServer::spawn();
    let url = server.url();
    let name = unique_name("kinds");
    let _workers = every_kind_shows_its_holders(&url, &name);
    let key = |kind: &str| format!("{name}:{kind}");

    // A Redisson holder: its client id, and no record.
    let mut con = server.connection();
    let redisson = key("redisson");
    let _: () = redis::cmd("HSET")
        .arg(&redisson)
        .arg("0b9c3a1e-5d2f-4b7a-9c1d-2e3f4a5b6c7d:57")
        .arg(2)
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("PEXPIRE")
        .arg(&redisson)
        .arg(30_000)
        .query(&mut con)
        .unwrap();
    let state = show_json(&url, &redisson);
    let c = &state["holders"][0]["client"];
    assert_eq!(c["kind"], "unrecorded");
    assert_eq!(c["client_id"], "0b9c3a1e-5d2f-4b7a-9c1d-2e3f4a5b6c7d");
    let text = stdout(&ferrisson(&url, &["show", &redisson]));
    assert!(
        text.contains("Redisson client 0b9c3a1e-5d2f-4b7a-9c1d-2e3f4a5b6c7d"),
        "{text}"
    );
    assert!(text.contains("exclusive x2"), "{text}");

    // ls: one line each, the kinds right, derived keys left out.
    let listed = stdout(&ferrisson(&url, &["ls", &format!("{name}:*")]));
    let mut kinds: Vec<String> = listed
        .lines()
        .map(|l| {
            let (n, summary) = l.split_once('\t').unwrap();
            format!(
                "{}={}",
                &n[name.len() + 1..],
                summary.split(':').next().unwrap()
            )
        })
        .collect();
    kinds.sort();
    assert_eq!(
        kinds,
        [
            "expirable=expirable-semaphore",
            "fair=fair-lock",
            "latch=latch",
            "mutex=mutex",
            "rate=rate-limiter",
            "redisson=lock?",
            "rw=rwlock",
            "semaphore=semaphore?",
        ]
    );
}

#[test]
fn ls_pages_through_ten_thousand_objects_with_scan() {
    let server = RedisServer::spawn();
    let url = server.url();
    let mut con = server.connection();
    let mut pipe = redis::pipe();
    for i in 0..10_000 {
        pipe.cmd("SET").arg(format!("many:{i}")).arg(5).ignore();
        pipe.cmd("HSET")
            .arg(format!("other:{i}"))
            .arg("field")
            .arg("value")
            .ignore();
    }
    let _: () = pipe.query(&mut con).unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut con)
        .unwrap();
    let out = ferrisson(&url, &["ls", "many:*"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = stdout(&out);
    assert_eq!(text.lines().count(), 10_000);
    assert!(
        text.lines()
            .all(|l| l.contains("\tsemaphore?: 5 available"))
    );
    let stats = ferrisson_testkit::command_calls(&mut con);
    assert!(stats.get("scan").copied().unwrap_or(0) > 2, "{stats:?}");
    assert_eq!(stats.get("keys"), None, "never KEYS");
    // Foreign data is never listed.
    let out = ferrisson(&url, &["ls", "other:*"]);
    assert_eq!(stdout(&out), "");
}

#[test]
fn force_unlock_and_delete_ask_first_and_refuse_other_kinds() {
    let server = RedisServer::spawn();
    let url = server.url();
    let name = unique_name("stuck");
    let holder = Worker::start("hold-lock", &url, &name);
    holder.expect("ready");
    let mut con = server.connection();
    let exists = |con: &mut redis::Connection, key: &str| -> bool {
        redis::cmd("EXISTS").arg(key).query(con).unwrap()
    };

    // No terminal to ask on and no --yes: refused, nothing changed.
    let out = ferrisson(&url, &["force-unlock", &name]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--yes"));
    assert!(exists(&mut con, &name));
    let out = ferrisson(&url, &["force-unlock", &name, "--yes"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout(&out).contains("unlocked"));
    assert!(!exists(&mut con, &name));

    // Another kind is refused.
    let sem = unique_name("stuck-sem");
    let _: () = redis::cmd("SET").arg(&sem).arg(3).query(&mut con).unwrap();
    let out = ferrisson(&url, &["force-unlock", &sem, "--yes"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a lock"));
    let out = ferrisson(&url, &["delete", &sem, "--yes", "--kind", "lock"]);
    assert_eq!(out.status.code(), Some(2));
    // A count could be a semaphore or a latch: the kind must be said.
    let out = ferrisson(&url, &["delete", &sem, "--yes"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--kind"));
    assert!(exists(&mut con, &sem));
    let out = ferrisson(&url, &["delete", &sem, "--yes", "--kind", "semaphore"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!exists(&mut con, &sem));
    // Someone else's data is refused whatever is asked.
    let foreign = unique_name("stuck-foreign");
    let _: () = redis::cmd("HSET")
        .arg(&foreign)
        .arg("a")
        .arg("b")
        .query(&mut con)
        .unwrap();
    for args in [
        ["delete", &foreign, "--yes"],
        ["force-unlock", &foreign, "--yes"],
    ] {
        let out = ferrisson(&url, &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
    assert!(exists(&mut con, &foreign));
}

/// `ferrisson watch` as a process, its lines on a channel.
struct Watch {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Watch {
    fn start(url: &str, args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ferrisson"))
            .arg("watch")
            .args(args)
            .env("REDIS_URL", url)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Self { child, lines }
    }

    /// The next line, which must contain `what`.
    fn next(&self, what: &str) -> String {
        let line = self
            .lines
            .recv_timeout(SOON)
            .unwrap_or_else(|_| panic!("no line for {what}"));
        assert!(line.contains(what), "expected {what}: {line}");
        line
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn watch_prints_a_line_for_each_change_of_holder() {
    let server = RedisServer::spawn();
    let url = server.url();
    let name = unique_name("watched");
    let mut holder = Worker::start("hold-lock", &url, &name);
    holder.expect("ready");
    let watch = Watch::start(&url, &[&name, "--kind", "lock", "--interval-ms", "50"]);
    let line = watch.next("exclusive x1 by hold-lock-app on ");
    assert!(line.contains(&format!("(pid {})", holder.pid())), "{line}");
    holder.kill();
    // The lease runs out (3 s): nothing is stored under the name again. (The dead holder's
    // record may end a moment before its lock does: a line of the lock held by a client
    // without a record can come first.)
    let mut line = watch.next("");
    if !line.contains("nothing stored") {
        assert!(line.contains("exclusive x1 by"), "{line}");
        line = watch.next("nothing stored");
    }
    assert!(line.contains("nothing stored"), "{line}");
}

/// `watch` looks again at once on each release message: with an interval of a minute, a latch
/// that opens and is armed again a moment later shows both states, each as it came; on one
/// server and on a cluster (sharded pub/sub) alike.
fn watch_sees_short_states_on(url: &str) {
    let name = unique_name("watched-latch");
    let (runtime, client) = runtime_and_client(url);
    let latch = CountDownLatch::new(&client, &name).unwrap();
    assert!(runtime.block_on(latch.try_set_count(1)).unwrap());
    let watch = Watch::start(url, &[&name, "--kind", "latch", "--interval-ms", "60000"]);
    // The watcher's subscription is confirmed before its first line.
    watch.next("count 1");
    runtime.block_on(latch.count_down()).unwrap();
    watch.next("nothing stored");
    assert!(runtime.block_on(latch.try_set_count_new_round(2)).unwrap());
    watch.next("count 2");
    runtime.block_on(latch.count_down()).unwrap();
    runtime.block_on(latch.count_down()).unwrap();
    watch.next("nothing stored");
}

#[test]
fn watch_wakes_on_release_messages_and_sees_short_states() {
    let server = RedisServer::spawn();
    watch_sees_short_states_on(&server.url());
}

#[test]
fn watch_wakes_on_release_messages_on_a_cluster() {
    let cluster = RedisCluster::spawn();
    let seeds: Vec<String> = cluster
        .urls()
        .iter()
        .map(|u| u.trim_start_matches("redis://").to_owned())
        .collect();
    watch_sees_short_states_on(&format!("redis-cluster://{}", seeds.join(",")));
}

/// An idle expirable semaphore (no permit taken: its set of taken permits is gone) is still an
/// expirable semaphore to `--kind expirable-semaphore`, so `show` answers and `watch` goes on
/// when every permit comes back; messages name kinds with the right article.
#[test]
fn an_idle_expirable_semaphore_is_recognised_and_messages_are_grammatical() {
    let server = RedisServer::spawn();
    let url = server.url();
    let name = unique_name("idle-expirable");
    let (runtime, client) = runtime_and_client(&url);
    let sem = ExpirableSemaphore::new(&client, &name).unwrap();
    runtime.block_on(sem.set_permits(2)).unwrap();
    let out = ferrisson(&url, &["show", &name, "--kind", "expirable-semaphore"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let permit = runtime.block_on(sem.acquire()).unwrap();
    let watch = Watch::start(
        &url,
        &[
            &name,
            "--kind",
            "expirable-semaphore",
            "--interval-ms",
            "50",
        ],
    );
    watch.next("1 available");
    runtime.block_on(permit.release()).unwrap();
    watch.next("2 available");
    let other = runtime.block_on(sem.acquire()).unwrap();
    watch.next("1 available");
    drop(other);
    runtime.block_on(client.shutdown()).unwrap();
    // Another kind asked of it: "an expirable-semaphore", "a lock".
    let lock = unique_name("a-lock");
    let client = runtime.block_on(Client::connect(&url)).unwrap();
    let guard = runtime
        .block_on(ReentrantLock::new(&client, &lock).unwrap().lock())
        .unwrap();
    let out = ferrisson(&url, &["show", &lock, "--kind", "expirable-semaphore"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not an expirable-semaphore"), "{err}");
    assert!(!err.contains(" a expirable"), "{err}");
    runtime.block_on(guard.unlock()).unwrap();
}

/// `show` and `watch` of a name with nothing stored exit 2, as the README's exit codes say.
#[test]
fn show_and_watch_of_nothing_stored_exit_2() {
    let server = RedisServer::spawn();
    let url = server.url();
    let name = unique_name("nothing-here");
    for args in [
        vec!["show", name.as_str()],
        vec!["show", name.as_str(), "--json"],
        vec!["show", name.as_str(), "--kind", "semaphore"],
        vec!["watch", name.as_str()],
    ] {
        let out = ferrisson(&url, &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("nothing is stored under"), "{args:?}: {err}");
    }
}

/// A faster multi-lock's group: its holder, with how many values it holds, and which values
/// are held by whom.
#[test]
fn show_of_a_group_names_its_holders_and_their_values() {
    let server = RedisServer::spawn();
    let url = server.url();
    let group = unique_name("order");
    let (runtime, client) = runtime_and_client(&url);
    let lock = ferrisson::FasterMultiLock::new(&client, &group, ["line-1", "line-2"]).unwrap();
    let guard = runtime.block_on(lock.lock()).unwrap();
    let owner = guard.owner().as_str().to_owned();
    let shown = show_json(&url, &group);
    assert_eq!(shown["kind"], "faster-multilock");
    assert_eq!(shown["holders"][0]["owner"], owner.as_str());
    assert_eq!(shown["holders"][0]["count"], 2);
    let text = stdout(&ferrisson(&url, &["show", &group]));
    for value in ["line-1", "line-2"] {
        let line = text
            .lines()
            .find(|l| l.contains(&ferrisson::redisson_field(value)))
            .unwrap_or_else(|| panic!("{value} not shown: {text}"));
        assert!(line.contains(&owner), "{line}");
    }
    runtime.block_on(guard.unlock()).unwrap();
}

/// A rate limiter's `available` is as of the read: permits given more than an interval ago
/// are back, though the stored value is as of the last acquire.
#[test]
fn show_of_an_idle_rate_limiter_counts_the_permits_back_in_its_window() {
    let server = RedisServer::spawn();
    let url = server.url();
    let name = unique_name("idle-rate");
    let (runtime, client) = runtime_and_client(&url);
    let limiter = RateLimiter::new(&client, &name).unwrap();
    runtime
        .block_on(limiter.set_rate(RateType::Overall, 5, Duration::from_millis(300)))
        .unwrap();
    assert!(runtime.block_on(limiter.try_acquire(3)).unwrap());
    let now = show_json(&url, &name);
    assert_eq!(now["rate"]["available"], 2, "{now}");
    eventually("the window gives the permits back", || {
        show_json(&url, &name)["rate"]["available"] == 5
    });
    let out = ferrisson(&url, &["show", &name]);
    assert!(stdout(&out).contains("5 left"), "{}", stdout(&out));
}

#[test]
fn a_password_from_the_environment_is_used_and_never_shown() {
    let server = RedisServer::spawn();
    let url = server.url();
    let mut con = server.connection();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg("s3cret:pw")
        .query(&mut con)
        .unwrap();
    let name = unique_name("guarded");
    // Connected: it read that nothing is stored (exit code 2).
    let out = ferrisson_with(&url, &["show", &name], &[("REDIS_PASSWORD", "s3cret:pw")]);
    assert_nothing_stored(&out);
    let out = ferrisson_with(&url, &["show", &name], &[("REDIS_PASSWORD", "wrong-Pa55")]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "refused credentials are an error"
    );
    let all = format!("{}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
    assert!(!all.contains("wrong-Pa55"), "{all}");
    let with_url = url.replace("redis://", "redis://:wrong-Pa55@");
    let out = ferrisson(&with_url, &["ls"]);
    assert!(!out.status.success());
    let all = format!("{}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
    assert!(!all.contains("wrong-Pa55"), "{all}");
}

#[test]
fn on_a_cluster_show_and_ls_reach_every_primary() {
    let cluster = RedisCluster::spawn();
    let urls = cluster.urls();
    let seeds: Vec<String> = urls
        .iter()
        .map(|u| u.trim_start_matches("redis://").to_owned())
        .collect();
    let url = format!("redis-cluster://{}", seeds.join(","));
    let prefix = unique_name("cl");
    // Names in different slots, so on different primaries.
    let names: Vec<String> = (0..12).map(|i| format!("{prefix}-{i}")).collect();
    let primaries: std::collections::HashSet<u16> = names
        .iter()
        .map(|n| cluster.primary_for(n).port())
        .collect();
    assert!(primaries.len() > 1, "the names spread over primaries");
    let holder = Worker::start("hold-lock", &url, &names[0]);
    holder.expect("ready");
    let (runtime, client) = runtime_and_client(&url);
    runtime.block_on(async {
        for n in &names[1..] {
            let latch = CountDownLatch::new(&client, n).unwrap();
            assert!(latch.try_set_count(2).await.unwrap());
        }
    });
    let state = show_json(&url, &names[0]);
    assert_eq!(
        state["holders"][0]["client"]["pid"].as_u64(),
        Some(u64::from(holder.pid()))
    );
    assert_eq!(state["holders"][0]["client"]["app"], "hold-lock-app");
    let listed = stdout(&ferrisson(&url, &["ls", &format!("{prefix}-*")]));
    let mut found: Vec<&str> = listed
        .lines()
        .map(|l| l.split('\t').next().unwrap())
        .collect();
    found.sort_unstable();
    let mut expected: Vec<&str> = names.iter().map(String::as_str).collect();
    expected.sort_unstable();
    assert_eq!(found, expected, "{listed}");
    assert!(listed.contains("latch: count 2"), "{listed}");
    runtime.block_on(client.shutdown()).unwrap();
}

#[test]
fn sentinel_urls_reach_their_servers() {
    let setup = RedisSentinel::spawn();
    let name = unique_name("behind-sentinel");
    let holder = Worker::start("hold-lock", &setup.url(), &name);
    holder.expect("ready");
    let state = show_json(&setup.url(), &name);
    assert_eq!(
        state["holders"][0]["client"]["pid"].as_u64(),
        Some(u64::from(holder.pid()))
    );
    drop(holder);
}

/// Built with the `tls` feature, the tool reaches a TLS server.
#[cfg(feature = "tls")]
#[test]
fn tls_urls_reach_their_servers() {
    let certs = ferrisson_testkit::TestCerts::try_generate().unwrap_or_else(|e| panic!("{e}"));
    let server = RedisServer::try_spawn_tls(&certs, false).unwrap_or_else(|e| panic!("{e}"));
    // The test CA is no system root: `#insecure` skips verification, as for the library.
    let url = format!("{}#insecure", server.tls_url().unwrap());
    let out = ferrisson(&url, &["show", "over-tls"]);
    assert_nothing_stored(&out);
    // Verified against the system's roots, the test certificate is refused.
    let out = ferrisson(&server.tls_url().unwrap(), &["show", "over-tls"]);
    assert!(!out.status.success());
}

/// The operators' ACL line of docs/deployment.md, its arguments after `ACL SETUSER <user>`.
fn operator_acl(password: &str) -> Vec<String> {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/deployment.md"
    ))
    .unwrap();
    let block = ferrisson_testkit::marked_section(&doc, "ops-acl");
    let line = block
        .lines()
        .find(|l| l.starts_with("ACL SETUSER"))
        .expect("the block has an ACL SETUSER line");
    line.split_whitespace()
        .skip(3)
        .map(|arg| arg.replace("<password>", password))
        .collect()
}

#[test]
fn the_documented_operator_rights_suffice_to_read_every_kind() {
    let server = RedisServer::spawn();
    let mut admin = server.connection();
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("ops")
        .arg(operator_acl("0ps-pw"))
        .query(&mut admin)
        .unwrap();
    let name = unique_name("ops");
    let _workers = every_kind_shows_its_holders(&server.url(), &name);
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut admin)
        .unwrap();
    let url = format!("redis://ops@127.0.0.1:{}", server.port());
    let env = [("REDIS_PASSWORD", "0ps-pw")];
    let listed = ferrisson_with(&url, &["ls", &format!("{name}:*"), "--json"], &env);
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    let objects: Vec<Value> = stdout(&listed)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(objects.len(), 7, "{objects:?}");
    for object in &objects {
        let shown = ferrisson_with(&url, &["show", object["name"].as_str().unwrap()], &env);
        assert!(
            shown.status.success(),
            "{}",
            String::from_utf8_lossy(&shown.stderr)
        );
    }
    let errors: String = redis::cmd("INFO")
        .arg("errorstats")
        .query(&mut admin)
        .unwrap();
    assert!(!errors.contains("NOPERM"), "{errors}");
    // Reads only: writing is refused.
    let out = ferrisson_with(&url, &["delete", &format!("{name}:rate"), "--yes"], &env);
    assert!(!out.status.success());
}

/// `doctor`: a report for people and one for scripts, and the exit code of the worst verdict
/// (the configurations themselves: `tests/client/doctor.rs`).
#[test]
fn doctor_reports_and_exits_with_the_worst_verdict() {
    // The test servers keep nothing on disk: a guarantee is broken.
    let server = RedisServer::spawn();
    let out = ferrisson(&server.url(), &["doctor"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let text = stdout(&out);
    assert!(text.contains("persistence  BROKEN"), "{text}");
    assert!(text.contains("fix: appendonly yes"), "{text}");
    assert!(text.contains("a guarantee is broken"), "{text}");
    let out = ferrisson(&server.url(), &["doctor", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(report["verdict"], "broken");
    assert_eq!(report["exit_code"], 1);
    let persistence = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["area"] == "persistence")
        .unwrap();
    assert_eq!(persistence["verdict"], "broken");

    // Every guarantee kept: exit 0.
    let kept = RedisServer::try_spawn_with(&["--appendonly", "yes", "--appendfsync", "always"])
        .unwrap_or_else(|e| panic!("{e}"));
    let out = ferrisson(&kept.url(), &["doctor"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stdout(&out).contains("every guarantee holds"));

    // Nothing to check: exit 2.
    let gone = RedisServer::spawn();
    let url = gone.url();
    drop(gone);
    let out = ferrisson(&url, &["doctor"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("could not be checked"));
}

/// `waits` leaves out the waits of a process that crashed: its record lives on until it
/// expires (a lease after the crash), but it is no longer refreshed, and a record whose time
/// to live fell a period and a half below its lease is a dead client's.
#[test]
fn waits_leaves_out_a_crashed_waiter() {
    let server = RedisServer::spawn();
    let url = server.url();
    let (runtime, client) = runtime_and_client(&url);
    let name = unique_name("crashwait");
    let guard = runtime
        .block_on(ReentrantLock::fenced(&client, &name).unwrap().lock())
        .unwrap();
    let mut waiter = Worker::start("wait-lock", &url, &name);
    waiter.expect("ready");
    let waiting_tasks = || -> Vec<Value> {
        let out = ferrisson(&url, &["waits", "--json"]);
        let graph: Value = serde_json::from_slice(&out.stdout).unwrap();
        graph["tasks"].as_array().cloned().unwrap_or_default()
    };
    eventually("the wait shown", || {
        waiting_tasks()
            .iter()
            .any(|t| t["client"]["app"] == "wait-lock-app" && t["client"]["pid"] == waiter.pid())
    });
    waiter.kill();
    eventually("the crashed waiter left out", || waiting_tasks().is_empty());
    // Its record is still there: only the graph leaves it out.
    let mut con = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let records: Vec<String> = redis::cmd("KEYS")
        .arg("ferrisson_client:*")
        .query(&mut con)
        .unwrap();
    let apps: Vec<Option<String>> = records
        .iter()
        .map(|k| {
            redis::cmd("HGET")
                .arg(k)
                .arg("app")
                .query(&mut con)
                .unwrap()
        })
        .collect();
    assert!(
        apps.iter().any(|a| a.as_deref() == Some("wait-lock-app")),
        "the crashed waiter's record outlives its waits in the graph: {apps:?}"
    );
    drop(guard);
}
