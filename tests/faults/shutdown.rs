//! `Client::shutdown`: a process that drops its guards and permits as `main` returns loses
//! nothing, because shutdown waits for the releases those drops left to the background (a
//! runtime ending with `main` would cut them short: a lock held for its whole lease, a plain
//! semaphore's permit gone for good). Worker *processes* (this test binary, started again as
//! `shutdown_worker`) take and drop, then shut down and exit.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use ferrisson::{AcquireOptions, Client, Error, Lock, LossReason, ReentrantLock, SyncObject};
use ferrisson_expirable_semaphore::ExpirableSemaphore;
use ferrisson_semaphore::Semaphore;
use redis::Commands;

/// Worker processes in all, and at once.
const RUNS: usize = 200;
const AT_ONCE: usize = 8;
/// Each semaphore's permits.
const PERMITS: u32 = 100;

/// The worker process: does nothing unless started by the test with its settings in the
/// environment. It takes a lock, a plain semaphore's permit and an expirable one, drops all
/// three (their releases go to the background), shuts the client down and returns, ending the
/// process with its runtime.
#[test]
#[ignore = "a worker process of the shutdown test, started by it"]
fn shutdown_worker() {
    let Ok(url) = std::env::var("SHUTDOWN_URL") else {
        return;
    };
    let env = |name: &str| std::env::var(name).unwrap();
    let (lock, semaphore, expirable) = (
        env("SHUTDOWN_LOCK"),
        env("SHUTDOWN_SEM"),
        env("SHUTDOWN_EXP"),
    );
    // As `#[tokio::main]` builds it.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let client = Client::connect(&url).await.unwrap();
        let guard = ReentrantLock::new(&client, &lock)
            .unwrap()
            .lock()
            .await
            .unwrap();
        let permit = Semaphore::new(&client, &semaphore)
            .unwrap()
            .acquire()
            .await
            .unwrap();
        let leased = ExpirableSemaphore::new(&client, &expirable)
            .unwrap()
            .acquire()
            .await
            .unwrap();
        // Proof that this run did its part, for the test to count.
        let mut con = redis::Client::open(url.as_str())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let _: i64 = redis::cmd("INCR")
            .arg(format!("{lock}:ran"))
            .query_async(&mut con)
            .await
            .unwrap();
        drop(guard);
        drop(permit);
        drop(leased);
        if std::env::var("SHUTDOWN_SKIP").is_err() {
            client.shutdown().await.unwrap();
        }
    });
}

/// Runs the worker processes `runs`, `AT_ONCE` at a time, each on its own lock
/// `{name}:lock:{run}` and the shared semaphores; `skip`: without the shutdown (the control).
async fn run_workers(url: &str, name: &str, runs: std::ops::Range<usize>, skip: bool) {
    let exe = std::env::current_exe().unwrap();
    let runs: Vec<usize> = runs.collect();
    let mut failures = Vec::new();
    for batch in runs.chunks(AT_ONCE) {
        let children: Vec<_> = batch
            .iter()
            .map(|run| {
                let mut command = Command::new(&exe);
                command
                    .arg(test_name(module_path!(), "shutdown_worker"))
                    .args(["--exact", "--ignored", "--nocapture"])
                    .env("SHUTDOWN_URL", url)
                    .env("SHUTDOWN_LOCK", format!("{name}:lock:{run}"))
                    .env("SHUTDOWN_SEM", format!("{name}:sem"))
                    .env("SHUTDOWN_EXP", format!("{name}:exp"))
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped());
                if skip {
                    command.env("SHUTDOWN_SKIP", "1");
                }
                (*run, command.spawn().unwrap())
            })
            .collect();
        for (run, child) in children {
            let output = tokio::task::spawn_blocking(move || child.wait_with_output())
                .await
                .unwrap()
                .unwrap();
            if !output.status.success() {
                failures.push(format!(
                    "run {run}: {}: {}",
                    output.status,
                    String::from_utf8_lossy(&output.stderr)
                ));
            }
        }
    }
    assert!(failures.is_empty(), "workers failed: {failures:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_that_drop_their_guards_and_shut_down_lose_nothing() {
    let redis = TestRedis::any();
    let url = redis.url();
    let client = client(&url).await;
    let name = unique_name("shutdown");
    let (semaphore_name, expirable_name) = (format!("{name}:sem"), format!("{name}:exp"));
    let semaphore = Semaphore::new(&client, &semaphore_name).unwrap();
    assert!(semaphore.try_set_permits(PERMITS).await.unwrap());
    let expirable = ExpirableSemaphore::new(&client, &expirable_name).unwrap();
    assert!(expirable.try_set_permits(PERMITS).await.unwrap());

    run_workers(&url, &name, 0..RUNS, false).await;

    // Looked at right away: every release landed before its process ended.
    let mut con = redis.connection();
    let ran = (0..RUNS)
        .filter(|run| {
            con.get::<_, Option<i64>>(format!("{name}:lock:{run}:ran"))
                .unwrap()
                == Some(1)
        })
        .count();
    assert_eq!(ran, RUNS, "every worker did its part");
    let held: Vec<usize> = (0..RUNS)
        .filter(|run| con.exists::<_, bool>(format!("{name}:lock:{run}")).unwrap())
        .collect();
    assert!(
        held.is_empty(),
        "locks still held after their processes shut down: runs {held:?}"
    );
    assert_eq!(
        semaphore.available_permits().await.unwrap(),
        i64::from(PERMITS),
        "a plain semaphore's permit dropped before shutdown was lost"
    );
    assert_eq!(expirable.acquired_permits().await.unwrap(), 0);
    assert_eq!(
        expirable.available_permits().await.unwrap(),
        i64::from(PERMITS)
    );

    // The control: the same processes without the shutdown leave their locks held (the
    // releases of the dropped guards never ran), which is what the test above would see.
    const CONTROL: usize = 10;
    run_workers(&url, &name, RUNS..RUNS + CONTROL, true).await;
    let held = (RUNS..RUNS + CONTROL)
        .filter(|run| con.exists::<_, bool>(format!("{name}:lock:{run}")).unwrap())
        .count();
    assert!(
        held > 0,
        "without a shutdown, no dropped guard's release was cut short: the test cannot tell"
    );
}

/// Shutdown ends waiting calls and refuses new ones, tells holders whose guards are still
/// alive (no longer renewed), and says what it left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_waits_refuses_new_work_and_tells_live_holders() {
    let redis = TestRedis::any();
    let holder = client(&redis.url()).await;
    let waiter = client(&redis.url()).await;
    let name = unique_name("shutdown-waits");
    let held = ReentrantLock::new(&holder, &name)
        .unwrap()
        .lock()
        .await
        .unwrap();
    let waiting = {
        let lock = ReentrantLock::new(&waiter, &name).unwrap();
        tokio::spawn(async move { lock.lock().await })
    };
    let semaphore = Semaphore::new(&waiter, &format!("{name}:sem")).unwrap();
    assert!(semaphore.try_set_permits(0).await.unwrap());
    let permits = {
        let semaphore = semaphore.clone();
        tokio::spawn(async move { semaphore.acquire().await })
    };
    eventually(Duration::from_secs(10), "both calls wait", || async {
        waiter.waiter_stats().1 >= 2
    })
    .await;
    // A hold of the waiter's client whose guard is still alive at shutdown.
    let other = ReentrantLock::new(&waiter, &format!("{name}:live"))
        .unwrap()
        .lock()
        .await
        .unwrap();

    let err = waiter.shutdown().await.unwrap_err();
    assert!(
        matches!(&err, Error::Unfinished(what) if what.contains("1 hold")),
        "{err}"
    );
    assert!(waiter.is_shut_down());
    let ended = join_within(
        Duration::from_secs(5),
        "waiting calls end",
        vec![
            tokio::spawn(async move { waiting.await.unwrap().map(drop) }),
            tokio::spawn(async move { permits.await.unwrap().map(drop) }),
        ],
    )
    .await;
    for result in ended {
        assert!(matches!(result, Err(Error::Closed(_))), "{result:?}");
    }
    assert_eq!(other.loss_reason(), Some(LossReason::ClientShutDown));
    let refused = ReentrantLock::new(&waiter, &name)
        .unwrap()
        .try_lock_with(AcquireOptions::new().with_wait(Duration::ZERO))
        .await;
    assert!(matches!(refused, Err(Error::Closed(_))), "{refused:?}");
    // The waiters left nothing behind: the holder's release frees the lock for the others.
    held.unlock().await.unwrap();
    assert!(
        !ReentrantLock::new(&holder, &name)
            .unwrap()
            .exists()
            .await
            .unwrap()
    );
    assert_eq!(semaphore.available_permits().await.unwrap(), 0);
    drop(other);
    holder.shutdown().await.unwrap();
}
