//! Turns between processes when each has several tasks on one lock: four processes (this test
//! binary again, running `turns_worker`) of two tasks each take one lock with 0 ms holds. A client hands its releases to its own waiting task for a bounded streak, then
//! gives the others a turn; the streak must survive its waiters' subscriptions coming and
//! going (with two tasks, the channel has no local waiter for a moment at each hand-off), or
//! the first process to get the lock keeps it for good. Asserted in acquisitions, not time:
//! the longest waits are printed, and the bench holds them to its targets
//! (`docs/benchmarks.md`, fairness).
#![allow(
    clippy::unwrap_used,
    clippy::panic,
    clippy::print_stdout,
    clippy::print_stderr
)]

use crate::common;

use std::time::Duration;

use common::*;
use ferrisson::{Client, FairLock, Lock, Mutex, ReentrantLock};

const CLIENTS: usize = 4;
const TASKS: usize = 2;

/// How long each process takes the lock in turns.
const RUN: Duration = Duration::from_secs(3);

/// Not a test: one process of [`two_tasks_per_process`], with two tasks taking the lock of
/// `TURNS_KIND` named `TURNS_NAME` for [`RUN`], then printing how many times it took it and
/// its longest wait.
#[test]
#[ignore = "a worker process of the turns tests, started by them"]
fn turns_worker() {
    let Some([url, kind, name]) =
        ferrisson_testkit::worker_env(["TURNS_URL", "TURNS_KIND", "TURNS_NAME"])
    else {
        return;
    };
    // As `#[tokio::main]` builds it.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let client = client(&url).await;
        let started = std::time::Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..TASKS {
            let take_turn = boxed_lock(&kind, &client, &name);
            tasks.push(tokio::spawn(async move {
                let (mut holds, mut longest) = (0u64, Duration::ZERO);
                while started.elapsed() < RUN {
                    longest = longest.max(take_turn().await);
                    holds += 1;
                }
                (holds, longest)
            }));
        }
        let (mut holds, mut longest) = (0u64, Duration::ZERO);
        for task in tasks {
            let (h, l) = task.await.unwrap();
            holds += h;
            longest = longest.max(l);
        }
        client.shutdown().await.unwrap();
        println!("turns: {holds} {}", longest.as_millis());
    });
}

/// One turn at a lock: take it, release it at once; how long the taking waited.
type BoxedLock = Box<dyn Fn() -> futures::future::BoxFuture<'static, Duration> + Send + Sync>;

/// Turns at `kind`'s lock `name` of `client`.
fn boxed_lock(kind: &str, client: &Client, name: &str) -> BoxedLock {
    fn of<L: Lock + Clone + Send + Sync + 'static>(lock: L) -> BoxedLock {
        Box::new(move || {
            let lock = lock.clone();
            Box::pin(async move {
                let asked = std::time::Instant::now();
                let guard = lock.lock().await.unwrap();
                let waited = asked.elapsed();
                guard.unlock().await.unwrap();
                waited
            })
        })
    }
    match kind {
        "reentrant" => of(ReentrantLock::new(client, name).unwrap()),
        "mutex" => of(Mutex::new(client, name).unwrap()),
        "fenced-mutex" => of(Mutex::fenced(client, name).unwrap()),
        "fair" => of(FairLock::new(client, name).unwrap()),
        other => panic!("no lock kind {other}"),
    }
}

/// Four processes of two tasks each take `kind`'s lock in turns for [`RUN`]: each gets at
/// least half its fair share of the acquisitions.
fn two_tasks_per_process(kind: &str) {
    let server = RedisServer::spawn();
    let url = server.url();
    let name = unique_name(&format!("turns-{kind}"));
    // The first process starts alone, and has the lock going between its two tasks before
    // the others come.
    let workers: Vec<_> = (0..CLIENTS)
        .map(|i| {
            if i == 1 {
                std::thread::sleep(Duration::from_millis(500));
            }
            ferrisson_testkit::rerun_test_as_process(
                &test_name(module_path!(), "turns_worker"),
                &[
                    ("TURNS_URL", &url),
                    ("TURNS_KIND", kind),
                    ("TURNS_NAME", &name),
                ],
            )
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap()
        })
        .collect();
    let mut counts = Vec::new();
    let mut longest = Vec::new();
    for worker in workers {
        let out = worker.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "a worker failed: {text}");
        let line = text
            .lines()
            .find_map(|l| l.split_once("turns: ").map(|(_, rest)| rest))
            .unwrap_or_else(|| panic!("a worker printed no count: {text}"));
        let mut parts = line.split(' ');
        counts.push(parts.next().unwrap().parse::<u64>().unwrap());
        longest.push(parts.next().unwrap().parse::<u64>().unwrap());
    }
    let all: u64 = counts.iter().sum();
    let fair = all as f64 / CLIENTS as f64;
    eprintln!("{kind}: acquisitions per process {counts:?}, longest waits (ms) {longest:?}");
    for (c, n) in counts.iter().enumerate() {
        assert!(
            *n as f64 >= 0.5 * fair,
            "{kind}: process {c} took {n} of {all} acquisitions (per process: {counts:?}; longest waits in ms: {longest:?}), under half its fair share"
        );
    }
}

#[test]
fn two_tasks_per_process_share_a_reentrant_lock() {
    two_tasks_per_process("reentrant");
}

#[test]
fn two_tasks_per_process_share_a_mutex() {
    two_tasks_per_process("mutex");
}

#[test]
fn two_tasks_per_process_share_a_fenced_mutex() {
    two_tasks_per_process("fenced-mutex");
}

#[test]
fn two_tasks_per_process_share_a_fair_lock() {
    two_tasks_per_process("fair");
}
