//! Deadlocks found across processes (`ClientConfig::with_deadlock_detection`): worker
//! *processes* (this test binary, started again as `deadlock_worker`) each take one thing and
//! then wait for what the next one holds. Exactly one of them fails with `Error::Deadlock`,
//! naming the cycle; it gives back what it holds and the others go on. Also: waits on record
//! and the wait-for graph (`Client::wait_graph`), and no false deadlock in a contended run
//! without cycles.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use ferrisson::{AcquireOptions, Client, ClientConfig, Error, FairLock, Lock, ReentrantLock};
use ferrisson_semaphore::Semaphore;
use redis::Commands;

/// The detection interval the workers use.
const INTERVAL: Duration = Duration::from_millis(300);
/// How long a worker waits at most for what it waits for.
const WAIT: Duration = Duration::from_secs(40);

/// What a worker took: a lock's guard or semaphore permits, given back when dropped.
#[allow(dead_code, reason = "held, and given back when dropped")]
enum Taken {
    Guard(ferrisson::HoldGuard),
    Permits(ferrisson_semaphore::Permits),
}

/// Takes `what` (`lock:<name>`, `fair:<name>` or `sem:<name>`, a semaphore of limit 1),
/// waiting up to `wait`.
async fn take(client: &Client, what: &str, wait: Duration) -> ferrisson::Result<Option<Taken>> {
    let (kind, name) = what.split_once(':').unwrap();
    let options = AcquireOptions::new().with_wait(wait);
    Ok(match kind {
        "lock" => ReentrantLock::new(client, name)?
            .acquire(options)
            .await?
            .map(Taken::Guard),
        "fair" => FairLock::new(client, name)?
            .acquire(options)
            .await?
            .map(Taken::Guard),
        "sem" => Semaphore::new(client, name)?
            .with_limit(1)?
            .try_acquire_with(options)
            .await?
            .map(Taken::Permits),
        other => panic!("no kind {other}"),
    })
}

/// The worker process: does nothing unless started by a test with its settings in the
/// environment. It takes `DEADLOCK_HOLD`, says it is ready, waits until all `DEADLOCK_OF`
/// workers are, then waits for `DEADLOCK_WAIT`, and writes how that ended under
/// `<name>:outcome:<me>`: `acquired`, or `deadlock <ms> <message>`.
#[test]
#[ignore = "a worker process of the deadlock tests, started by them"]
fn deadlock_worker() {
    let Ok(url) = std::env::var("DEADLOCK_URL") else {
        return;
    };
    let env = |name: &str| std::env::var(name).unwrap();
    let (name, me, of) = (env("DEADLOCK_NAME"), env("DEADLOCK_ME"), env("DEADLOCK_OF"));
    let (hold, wait) = (env("DEADLOCK_HOLD"), env("DEADLOCK_WAIT"));
    let of: usize = of.parse().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let config = ClientConfig::new(&url)
            .with_app_name(format!("deadlock-worker-{me}"))
            .with_deadlock_detection(INTERVAL);
        let client = Client::with_config(config).await.unwrap();
        let held = take(&client, &hold, Duration::ZERO).await.unwrap().unwrap();
        let redis_client = redis::Client::open(url.as_str()).unwrap();
        let mut con = redis_client
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let _: () = redis::AsyncCommands::set(&mut con, format!("{name}:ready:{me}"), 1)
            .await
            .unwrap();
        eventually(Duration::from_secs(60), "every worker ready", || {
            let mut con = con.clone();
            let name = name.clone();
            async move {
                let mut ready = 0;
                for i in 0..of {
                    let r: Option<i64> =
                        redis::AsyncCommands::get(&mut con, format!("{name}:ready:{i}"))
                            .await
                            .unwrap();
                    ready += usize::from(r.is_some());
                }
                ready == of
            }
        })
        .await;
        let started = tokio::time::Instant::now();
        let outcome = match take(&client, &wait, WAIT).await {
            Ok(Some(_)) => "acquired".to_owned(),
            Ok(None) => "timed out".to_owned(),
            Err(Error::Deadlock(why)) => {
                format!("deadlock {} {why}", started.elapsed().as_millis())
            }
            Err(e) => format!("error {e}"),
        };
        // The victim gives back what it holds: the others go on.
        drop(held);
        let _: () = redis::AsyncCommands::set(&mut con, format!("{name}:outcome:{me}"), &outcome)
            .await
            .unwrap();
        client.shutdown().await.unwrap();
    });
}

/// Runs one worker per `(hold, wait)` pair at once and returns their outcomes, in order.
async fn run_cycle(redis: &TestRedis, name: &str, roles: &[(&str, &str)]) -> Vec<String> {
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = roles
        .iter()
        .enumerate()
        .map(|(me, (hold, wait))| {
            Command::new(&exe)
                .arg(test_name(module_path!(), "deadlock_worker"))
                .args(["--exact", "--ignored", "--nocapture"])
                .env("DEADLOCK_URL", redis.url())
                .env("DEADLOCK_NAME", name)
                .env("DEADLOCK_ME", me.to_string())
                .env("DEADLOCK_OF", roles.len().to_string())
                .env("DEADLOCK_HOLD", hold)
                .env("DEADLOCK_WAIT", wait)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let output = tokio::task::spawn_blocking(move || child.wait_with_output())
            .await
            .unwrap()
            .unwrap();
        assert!(
            output.status.success(),
            "a worker failed: {}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let mut con = redis.connection();
    (0..roles.len())
        .map(|me| {
            con.get::<_, Option<String>>(format!("{name}:outcome:{me}"))
                .unwrap()
                .unwrap_or_else(|| format!("worker {me} wrote no outcome"))
        })
        .collect()
}

/// Checks that exactly one worker of `outcomes` gave way with a deadlock naming every worker
/// of the cycle, and found within a few intervals; the others acquired.
fn one_gave_way(outcomes: &[String]) {
    let victims: Vec<&String> = outcomes
        .iter()
        .filter(|o| o.starts_with("deadlock"))
        .collect();
    assert_eq!(victims.len(), 1, "exactly one victim: {outcomes:#?}");
    assert_eq!(
        outcomes.iter().filter(|o| *o == "acquired").count(),
        outcomes.len() - 1,
        "the others went on: {outcomes:#?}"
    );
    let message = victims[0];
    for me in 0..outcomes.len() {
        assert!(
            message.contains(&format!("deadlock-worker-{me} on ")),
            "the cycle names every process (app, host, pid): {message}"
        );
    }
    assert!(message.contains("(pid "), "{message}");
    let found_ms: u64 = message.split(' ').nth(1).unwrap().parse().unwrap();
    // Found about one interval after the cycle formed: bounded loosely here (a loaded
    // machine is slow to schedule), far below the wait limit the workers would wait out.
    assert!(
        found_ms < 20 * INTERVAL.as_millis() as u64,
        "found after {found_ms} ms: {message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_each_waiting_for_the_others_lock_one_gives_way() {
    let redis = TestRedis::any();
    let name = unique_name("deadlock2");
    let (a, b) = (format!("lock:{name}:a"), format!("lock:{name}:b"));
    let outcomes = run_cycle(&redis, &name, &[(&a, &b), (&b, &a)]).await;
    one_gave_way(&outcomes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_in_a_cycle_across_a_lock_a_fair_lock_and_a_semaphore_one_gives_way() {
    let redis = TestRedis::any();
    let name = unique_name("deadlock3");
    let lock = format!("lock:{name}:lock");
    let fair = format!("fair:{name}:fair");
    let sem = format!("sem:{name}:sem");
    let outcomes = run_cycle(
        &redis,
        &name,
        &[(&lock, &fair), (&fair, &sem), (&sem, &lock)],
    )
    .await;
    one_gave_way(&outcomes);
}
