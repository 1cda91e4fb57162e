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
use ferrisson::{
    AcquireOptions, Client, Error, FairLock, Lock, LossReason, ReentrantLock, SyncObject,
};
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
        if std::env::var("SHUTDOWN_LIVE").is_ok() {
            // Everything still held, and a wait in a fair lock's queue, when the shutdown
            // comes (as a Ctrl-C handler's would): the shutdown gives it all back.
            let fair = FairLock::new(&client, &format!("{lock}:fair"))
                .unwrap()
                .lock()
                .await
                .unwrap();
            let queued = {
                let queue = FairLock::new(&client, &env("SHUTDOWN_QUEUE")).unwrap();
                tokio::spawn(async move { queue.lock().await })
            };
            while client.waiter_stats().1 == 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let report = client.shutdown_report(Duration::from_millis(100)).await;
            assert!(report.is_complete(), "{report}");
            assert_eq!(report.given_back.len(), 4, "{report}");
            assert!(matches!(queued.await.unwrap(), Err(Error::Closed(_))));
            for lost in [
                guard.loss_reason(),
                fair.loss_reason(),
                leased.loss_reason(),
            ] {
                assert_eq!(lost, Some(LossReason::ClientShutDown));
            }
            let unlocked = guard.unlock().await;
            assert!(
                matches!(unlocked, Err(Error::LeaseLost(LossReason::ClientShutDown))),
                "{unlocked:?}"
            );
            assert!(matches!(
                permit.release().await,
                Err(Error::LeaseLost(LossReason::ClientShutDown))
            ));
            // The rest are dropped as the process ends: nothing is left to release.
            drop((fair, leased));
            return;
        }
        drop(guard);
        drop(permit);
        drop(leased);
        if std::env::var("SHUTDOWN_SKIP").is_err() {
            client.shutdown().await.unwrap();
        }
    });
}

/// The semaphores every worker takes a permit of, `{name}:sem` and `{name}:exp`, with
/// [`PERMITS`] each.
async fn shared_semaphores(client: &Client, name: &str) -> (Semaphore, ExpirableSemaphore) {
    let semaphore = Semaphore::new(client, &format!("{name}:sem")).unwrap();
    assert!(semaphore.try_set_permits(PERMITS).await.unwrap());
    let expirable = ExpirableSemaphore::new(client, &format!("{name}:exp")).unwrap();
    assert!(expirable.try_set_permits(PERMITS).await.unwrap());
    (semaphore, expirable)
}

/// How many of the worker runs `runs` did their part (each notes it once).
fn workers_that_ran(
    con: &mut redis::Connection,
    name: &str,
    runs: std::ops::Range<usize>,
) -> usize {
    runs.filter(|run| {
        con.get::<_, Option<i64>>(format!("{name}:lock:{run}:ran"))
            .unwrap()
            == Some(1)
    })
    .count()
}

/// How a worker ends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// It drops everything, then shuts down.
    DropThenShutDown,
    /// It drops everything and exits (the control).
    DropWithoutShutdown,
    /// It shuts down with everything still held, and waiting in a fair lock's queue.
    ShutDownWhileHolding,
}

/// Runs the worker processes `runs`, `AT_ONCE` at a time, each on its own lock
/// `{name}:lock:{run}` and the shared semaphores, ending as `ending` says.
async fn run_workers(url: &str, name: &str, runs: std::ops::Range<usize>, ending: Ending) {
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
                match ending {
                    Ending::DropThenShutDown => {}
                    Ending::DropWithoutShutdown => {
                        command.env("SHUTDOWN_SKIP", "1");
                    }
                    Ending::ShutDownWhileHolding => {
                        command
                            .env("SHUTDOWN_LIVE", "1")
                            .env("SHUTDOWN_QUEUE", format!("{name}:queue"));
                    }
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
    let (semaphore, expirable) = shared_semaphores(&client, &name).await;

    run_workers(&url, &name, 0..RUNS, Ending::DropThenShutDown).await;

    // Looked at right away: every release landed before its process ended.
    let mut con = redis.connection();
    assert_eq!(
        workers_that_ran(&mut con, &name, 0..RUNS),
        RUNS,
        "every worker did its part"
    );
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
    run_workers(
        &url,
        &name,
        RUNS..RUNS + CONTROL,
        Ending::DropWithoutShutdown,
    )
    .await;
    let held = (RUNS..RUNS + CONTROL)
        .filter(|run| con.exists::<_, bool>(format!("{name}:lock:{run}")).unwrap())
        .count();
    assert!(
        held > 0,
        "without a shutdown, no dropped guard's release was cut short: the test cannot tell"
    );
}

/// Worker processes shut down while they still hold a lock, a fair lock, a plain
/// semaphore's permit and an expirable one, and wait in a fair lock's queue: the shutdown
/// gives it all back before they exit. Nothing is left taken or queued, in 10 of 10 runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_that_shut_down_while_holding_leave_nothing_taken_or_queued() {
    const LIVE_RUNS: usize = 10;
    let redis = TestRedis::any();
    let url = redis.url();
    let client = client(&url).await;
    let name = unique_name("shutdown-live");
    let (semaphore, expirable) = shared_semaphores(&client, &name).await;
    // Held here the whole time: every worker waits in its queue at its shutdown.
    let queue = FairLock::new(&client, &format!("{name}:queue")).unwrap();
    let blocking = queue.lock().await.unwrap();

    run_workers(&url, &name, 0..LIVE_RUNS, Ending::ShutDownWhileHolding).await;

    let mut con = redis.connection();
    assert_eq!(
        workers_that_ran(&mut con, &name, 0..LIVE_RUNS),
        LIVE_RUNS,
        "every worker did its part"
    );
    let held: Vec<String> = (0..LIVE_RUNS)
        .flat_map(|run| {
            [
                format!("{name}:lock:{run}"),
                format!("{name}:lock:{run}:fair"),
            ]
        })
        .filter(|key| con.exists::<_, bool>(key).unwrap())
        .collect();
    assert!(held.is_empty(), "still held after shutdown: {held:?}");
    assert_eq!(
        semaphore.available_permits().await.unwrap(),
        i64::from(PERMITS),
        "a plain semaphore's permit held through shutdown was lost"
    );
    assert_eq!(expirable.acquired_permits().await.unwrap(), 0);
    let queued: i64 = con
        .llen(format!("redisson_lock_queue:{{{name}:queue}}"))
        .unwrap();
    assert_eq!(queued, 0, "a waiter stayed in the fair lock's queue");
    blocking.unlock().await.unwrap();
    client.shutdown().await.unwrap();
}

/// Shutdown ends waiting calls and refuses new ones, tells holders whose guards are still
/// alive, gives back what they hold, and says what it gave back.
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

    let report = waiter.shutdown_report(Duration::from_millis(100)).await;
    assert!(report.is_complete(), "{report}");
    assert_eq!(report.given_back.len(), 1, "{report}");
    assert!(
        report.given_back[0].contains(&format!("{name}:live")),
        "{report}"
    );
    assert!(waiter.is_shut_down());
    // Given back: the lock is free, and the guard has nothing left to release.
    assert!(
        !ReentrantLock::new(&holder, &format!("{name}:live"))
            .unwrap()
            .exists()
            .await
            .unwrap()
    );
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
    assert!(matches!(
        other.unlock().await,
        Err(Error::LeaseLost(LossReason::ClientShutDown))
    ));
    holder.shutdown().await.unwrap();
}
