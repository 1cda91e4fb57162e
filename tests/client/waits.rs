//! Waits on record and the wait-for graph (`Client::wait_graph`, what `ferrisson waits`
//! shows): a wait goes into its client's record once it lasts and out when it ends, an
//! acquisition that does not wait writes nothing, the graph shows holders, waiters and the
//! cycles with their victim; deadlock detection among the tasks of one process, across kinds;
//! a semaphore without a limit is never taken as blocking for certain; and no false deadlock
//! in a contended run without cycles (`DEADLOCK_SOAK_SECS` makes it longer: the run is
//! 600 s).
#![allow(clippy::unwrap_used, clippy::panic, clippy::print_stderr)]

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::*;
use ferrisson::{
    AcquireOptions, Client, ClientConfig, Error, FairLock, Lock, Mutex, ReadWriteLock,
    ReentrantLock, Semaphore,
};

/// Whether the server has the script that writes waits into records.
fn waits_script_loaded(con: &mut redis::Connection) -> bool {
    let sha = ferrisson_core::__engine::scripts()
        .into_iter()
        .find(|s| s.name() == "core/client_waits")
        .unwrap()
        .sha1()
        .to_owned();
    let exists: Vec<bool> = redis::cmd("SCRIPT")
        .arg("EXISTS")
        .arg(sha)
        .query(con)
        .unwrap();
    exists == [true]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquisition_that_does_not_wait_writes_no_wait() {
    let redis = TestRedis::any();
    // Default settings: a wait that lasted would go on record.
    let client = Client::connect(&redis.url()).await.unwrap();
    let lock = ReentrantLock::new(&client, &unique_name("nowait")).unwrap();
    for _ in 0..200 {
        lock.lock().await.unwrap().unlock().await.unwrap();
    }
    let mut con = redis.connection();
    assert!(recorded_waits(&mut con, &client).is_empty());
    assert!(
        !waits_script_loaded(&mut con),
        "an acquisition that never waited made the client write waits"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_goes_on_record_once_it_lasts_and_off_when_it_ends() {
    let redis = TestRedis::any();
    let holder = client(&redis.url()).await;
    let waiter = Client::with_config(ClientConfig::new(redis.url()).with_app_name("the-waiter"))
        .await
        .unwrap();
    let name = unique_name("onrecord");
    let guard = ReentrantLock::new(&holder, &name)
        .unwrap()
        .lock()
        .await
        .unwrap();
    let semaphore = Semaphore::new(&waiter, &format!("{name}:sem"))
        .unwrap()
        .with_limit(2)
        .unwrap();
    let lock = ReentrantLock::new(&waiter, &name).unwrap();
    let waiting = tokio::spawn(async move {
        // Holds belong to the task that took them.
        let permits = semaphore.acquire().await.unwrap();
        let taken = lock.lock().await;
        drop(permits);
        taken
    });
    let mut con = redis.connection();
    eventually(Duration::from_secs(10), "the wait on record", || {
        let found = recorded_waits(&mut con, &waiter).len() == 1;
        async move { found }
    })
    .await;
    let graph = waiter.wait_graph().await.unwrap();
    assert!(graph.cycles.is_empty(), "{graph:#?}");
    let task = graph
        .tasks
        .iter()
        .find(|t| t.client_id == waiter.id())
        .unwrap_or_else(|| panic!("the waiting task: {graph:#?}"));
    assert!(!task.deadlocked);
    match &task.party {
        ferrisson::Party::Ferrisson(record) => assert_eq!(record.app, "the-waiter"),
        other => panic!("{other:?}"),
    }
    let [wait] = task.waits.as_slice() else {
        panic!("one wait: {task:#?}");
    };
    assert_eq!(
        (wait.kind.as_str(), wait.key.as_str()),
        ("lock", name.as_str())
    );
    assert_eq!(wait.holders, vec![guard.owner().as_str().to_owned()]);
    // The holder waits for nothing: it blocks the wait, but is no task of the graph.
    assert!(wait.blocked_by.is_empty());
    // What the waiting task holds: the permit it took before.
    assert_eq!(task.holds.len(), 1, "{task:#?}");
    assert_eq!(
        (task.holds[0].kind.as_str(), task.holds[0].permits),
        ("semaphore", 1)
    );

    guard.unlock().await.unwrap();
    waiting.await.unwrap().unwrap().unlock().await.unwrap();
    eventually(Duration::from_secs(10), "the wait off the record", || {
        let gone = recorded_waits(&mut con, &waiter).is_empty();
        async move { gone }
    })
    .await;
}

/// Two tasks of `clients` (one each, or both of one client): the first holds `a` and waits
/// for `b`, the second holds `b` and waits for `a`, each up to `wait`. Returns both outcomes:
/// `Ok(true)` acquired, `Ok(false)` timed out.
pub(crate) async fn crossed<A, B>(
    clients: (&Client, &Client),
    a: impl Fn(&Client) -> A,
    b: impl Fn(&Client) -> B,
    wait: Duration,
) -> Vec<ferrisson::Result<bool>>
where
    A: Lock + Send + Sync + 'static,
    B: Lock + Send + Sync + 'static,
{
    let ready = Arc::new(tokio::sync::Barrier::new(2));
    let options = AcquireOptions::new().with_wait(wait);
    let (a1, b1) = (a(clients.0), b(clients.0));
    let (a2, b2) = (a(clients.1), b(clients.1));
    let first = {
        let ready = ready.clone();
        tokio::spawn(async move {
            let held = a1.lock().await.unwrap();
            ready.wait().await;
            let outcome = b1.acquire(options).await.map(|g| g.is_some());
            drop(held);
            outcome
        })
    };
    let second = tokio::spawn(async move {
        let held = b2.lock().await.unwrap();
        ready.wait().await;
        let outcome = a2.acquire(options).await.map(|g| g.is_some());
        drop(held);
        outcome
    });
    vec![first.await.unwrap(), second.await.unwrap()]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_tasks_of_one_client_in_a_cycle_across_a_mutex_and_a_write_lock_one_gives_way() {
    let redis = TestRedis::any();
    let client = detecting(&redis).await;
    let name = unique_name("intask");
    let outcomes = crossed(
        (&client, &client),
        |c| Mutex::new(c, &format!("{name}:mutex")).unwrap(),
        |c| {
            ReadWriteLock::new(c, &format!("{name}:rw"))
                .unwrap()
                .write_lock()
        },
        Duration::from_secs(30),
    )
    .await;
    let why = one_gave_way(&outcomes);
    assert!(why.contains("mutex") && why.contains("write lock"), "{why}");
}

/// Checks that exactly one of `outcomes` (of crossed waits) gave way with a deadlock and the
/// other got in; returns the deadlock's message.
pub(crate) fn one_gave_way(outcomes: &[ferrisson::Result<bool>]) -> String {
    let deadlocks: Vec<&String> = outcomes
        .iter()
        .filter_map(|o| match o {
            Err(Error::Deadlock(why)) => Some(why),
            _ => None,
        })
        .collect();
    assert_eq!(deadlocks.len(), 1, "{outcomes:?}");
    assert!(
        outcomes.iter().any(|o| matches!(o, Ok(true))),
        "{outcomes:?}"
    );
    deadlocks[0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_detection_the_graph_shows_the_cycle_and_nobody_fails() {
    let redis = TestRedis::any();
    let (one, two) = (
        Client::connect(&redis.url()).await.unwrap(),
        Client::connect(&redis.url()).await.unwrap(),
    );
    let name = unique_name("shown");
    let (probe_redis, probe_name) = (redis.url(), name.clone());
    let probe = tokio::spawn(async move {
        let observer = client(&probe_redis).await;
        let mut seen = None;
        for _ in 0..400 {
            let graph = observer.wait_graph().await.unwrap();
            let mine = graph
                .tasks
                .iter()
                .any(|t| t.waits.iter().any(|w| w.key.starts_with(&probe_name)));
            if mine && !graph.cycles.is_empty() {
                seen = Some(graph);
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        seen
    });
    let outcomes = crossed(
        (&one, &two),
        |c| ReentrantLock::new(c, &format!("{name}:a")).unwrap(),
        |c| FairLock::new(c, &format!("{name}:b")).unwrap(),
        Duration::from_secs(4),
    )
    .await;
    // Nobody gives way: the first to wait out its limit lets go of what it holds (the other,
    // still waiting a moment longer, may then get in).
    no_verdict(&outcomes);
    let graph = probe.await.unwrap().expect("the graph showed the cycle");
    let [cycle] = graph.cycles.as_slice() else {
        panic!("{graph:#?}");
    };
    assert_eq!(cycle.tasks.len(), 2);
    assert!(cycle.tasks.contains(&cycle.victim));
    for &t in &cycle.tasks {
        assert!(graph.tasks[t].deadlocked);
        assert_eq!(graph.tasks[t].waits[0].blocked_by.len(), 1, "{graph:#?}");
    }
    let line = graph.describe(cycle);
    assert!(
        line.contains("[victim]") && line.contains("fair lock"),
        "{line}"
    );
}

/// Two tasks: the first takes a permit with `take_permit`, then waits for `lock`; the second
/// holds `lock`, then waits for a permit with `wait_permit`; each waits up to `wait`.
/// Returns both outcomes: `Ok(true)` acquired, `Ok(false)` timed out.
async fn permit_and_lock_crossed<P, T, TF, W, WF>(
    lock: ReentrantLock,
    take_permit: T,
    wait_permit: W,
    wait: Duration,
) -> [ferrisson::Result<bool>; 2]
where
    P: Send + 'static,
    T: FnOnce() -> TF + Send + 'static,
    TF: std::future::Future<Output = P> + Send,
    W: FnOnce(AcquireOptions) -> WF + Send + 'static,
    WF: std::future::Future<Output = ferrisson::Result<bool>> + Send,
{
    let ready = Arc::new(tokio::sync::Barrier::new(2));
    let options = AcquireOptions::new().with_wait(wait);
    let first = {
        let (lock, ready) = (lock.clone(), ready.clone());
        tokio::spawn(async move {
            let permit = take_permit().await;
            ready.wait().await;
            let outcome = lock.acquire(options).await.map(|g| g.is_some());
            drop(permit);
            outcome
        })
    };
    let second = tokio::spawn(async move {
        let held = lock.lock().await.unwrap();
        ready.wait().await;
        let outcome = wait_permit(options).await;
        drop(held);
        outcome
    });
    [first.await.unwrap(), second.await.unwrap()]
}

/// A client that finds deadlocks every 50 ms, on `redis`.
async fn detecting(redis: &TestRedis) -> Client {
    let config = ClientConfig::new(redis.url()).with_deadlock_detection(Duration::from_millis(50));
    Client::with_config(config).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_cycle_with_a_client_that_does_not_detect_the_one_that_does_gives_way() {
    let redis = TestRedis::any();
    let detecting = detecting(&redis).await;
    let config = ClientConfig::new(redis.url()).with_wait_record_delay(Duration::from_millis(20));
    let plain = Client::with_config(config).await.unwrap();
    let name = unique_name("mixed");
    let (a, b) = (format!("{name}:a"), format!("{name}:b"));
    let options = AcquireOptions::new().with_wait(Duration::from_secs(5));
    let (b_held, b_held_rx) = tokio::sync::oneshot::channel();
    let (go, go_rx) = tokio::sync::oneshot::channel::<()>();
    let plain_task = {
        let (lock_a, lock_b) = (
            ReentrantLock::new(&plain, &a).unwrap(),
            ReentrantLock::new(&plain, &b).unwrap(),
        );
        tokio::spawn(async move {
            let held = lock_b.lock().await.unwrap();
            b_held.send(()).unwrap();
            go_rx.await.unwrap();
            let outcome = lock_a.acquire(options).await.map(|g| g.is_some());
            drop(held);
            outcome
        })
    };
    b_held_rx.await.unwrap();
    let detecting_task = {
        let (lock_a, lock_b) = (
            ReentrantLock::new(&detecting, &a).unwrap(),
            ReentrantLock::new(&detecting, &b).unwrap(),
        );
        tokio::spawn(async move {
            let held = lock_a.lock().await.unwrap();
            let outcome = lock_b.acquire(options).await.map(|g| g.is_some());
            drop(held);
            outcome
        })
    };
    // The detecting client's wait begins first: by the rule alone the plain client's, which
    // begins last, would be the victim, and nobody would act on it.
    let mut con = redis.connection();
    eventually(
        Duration::from_secs(5),
        "the detecting client's wait on record",
        || {
            let n = recorded_waits(&mut con, &detecting).len();
            async move { n == 1 }
        },
    )
    .await;
    go.send(()).unwrap();
    let outcomes = [detecting_task.await.unwrap(), plain_task.await.unwrap()];
    assert!(
        matches!(outcomes[0], Err(Error::Deadlock(_))),
        "{outcomes:?}"
    );
    assert!(matches!(outcomes[1], Ok(true)), "{outcomes:?}");
}

/// [`permit_and_lock_crossed`] over `$semaphore` (given one permit, `try_set_permits(1)`) and
/// a lock of `$client` named `$name:lock`, each waiting up to `$wait`: one shape for both
/// semaphore types, whose calls are alike but not one trait.
macro_rules! crossed_over_a_permit {
    ($client:expr, $semaphore:expr, $name:expr, $wait:expr) => {{
        let semaphore = $semaphore;
        assert!(semaphore.try_set_permits(1).await.unwrap());
        let lock = ReentrantLock::new($client, &format!("{}:lock", $name)).unwrap();
        let taker = semaphore.clone();
        permit_and_lock_crossed(
            lock,
            || async move { taker.acquire().await.unwrap() },
            |options| async move {
                semaphore
                    .try_acquire_with(options)
                    .await
                    .map(|p| p.is_some())
            },
            $wait,
        )
        .await
    }};
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semaphore_without_a_limit_is_never_taken_as_blocking_for_certain() {
    let redis = TestRedis::any();
    let client = detecting(&redis).await;
    let name = unique_name("nolimit");
    let semaphore = Semaphore::new(&client, &format!("{name}:sem")).unwrap();
    let outcomes = crossed_over_a_permit!(&client, semaphore, name, Duration::from_secs(2));
    // A release of unknown origin could end the semaphore's wait: no verdict.
    no_verdict(&outcomes);
}

/// Checks that `outcomes` (of two crossed waits) ended without a verdict: at least one waited
/// out its limit, and none failed (the other may get in once the first lets go).
fn no_verdict(outcomes: &[ferrisson::Result<bool>]) {
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    assert!(
        outcomes.iter().any(|o| matches!(o, Ok(false))),
        "{outcomes:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cycle_through_an_expirable_semaphore_is_found() {
    let redis = TestRedis::any();
    let client = detecting(&redis).await;
    let name = unique_name("expirable");
    let semaphore = ferrisson::ExpirableSemaphore::new(&client, &format!("{name}:sem")).unwrap();
    let outcomes = crossed_over_a_permit!(&client, semaphore, name, Duration::from_secs(30));
    one_gave_way(&outcomes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_latch_wait_and_a_fair_queue_show_in_the_graph() {
    let redis = TestRedis::any();
    let holder = client(&redis.url()).await;
    let config = ClientConfig::new(redis.url()).with_wait_record_delay(Duration::from_millis(50));
    let waiter = Client::with_config(config).await.unwrap();
    let name = unique_name("shown-kinds");
    let latch = ferrisson::CountDownLatch::new(&waiter, &format!("{name}:latch")).unwrap();
    assert!(latch.try_set_count(1).await.unwrap());
    let guard = FairLock::new(&holder, &format!("{name}:fair"))
        .unwrap()
        .lock()
        .await
        .unwrap();
    let mut tasks = Vec::new();
    {
        let latch = latch.clone();
        tasks.push(tokio::spawn(
            async move { latch.wait().await.map(|()| true) },
        ));
    }
    let fair = FairLock::new(&waiter, &format!("{name}:fair")).unwrap();
    // Two waiters in the fair queue, the second once the first is on record.
    let first = fair.clone();
    tasks.push(tokio::spawn(
        async move { first.lock().await.map(|_| true) },
    ));
    let mut con = redis.connection();
    eventually(Duration::from_secs(10), "two waits on record", || {
        let n = recorded_waits(&mut con, &waiter).len();
        async move { n == 2 }
    })
    .await;
    tasks.push(tokio::spawn(async move { fair.lock().await.map(|_| true) }));
    let deadline = tokio::time::Instant::now()
        .checked_add(Duration::from_secs(10))
        .expect("a test's patience fits the clock");
    let graph = loop {
        let graph = waiter.wait_graph().await.unwrap();
        if graph.tasks.iter().map(|t| t.waits.len()).sum::<usize>() == 3 {
            break graph;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "three waits in the graph: {graph:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(graph.cycles.is_empty(), "{graph:#?}");
    let waits: Vec<&ferrisson::TaskWait> = graph.tasks.iter().flat_map(|t| &t.waits).collect();
    let latch_wait = waits.iter().find(|w| w.kind == "latch").unwrap();
    assert!(latch_wait.blocked_by.is_empty() && latch_wait.holders.is_empty());
    let mut queued: Vec<usize> = waits
        .iter()
        .filter(|w| w.kind == "fair_lock")
        .map(|w| w.queued_ahead.len())
        .collect();
    queued.sort_unstable();
    assert_eq!(queued, vec![0, 1], "{graph:#?}");
    assert!(graph.tasks.iter().all(|t| !t.deadlocked));

    latch.count_down().await.unwrap();
    guard.unlock().await.unwrap();
    for task in tasks {
        assert!(task.await.unwrap().unwrap());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waits_kept_off_the_record_are_not_written() {
    let redis = TestRedis::any();
    let holder = client(&redis.url()).await;
    let config = ClientConfig::new(redis.url()).with_wait_record_delay(Duration::MAX);
    let waiter = Client::with_config(config).await.unwrap();
    let name = unique_name("offrecord");
    let guard = ReentrantLock::new(&holder, &name)
        .unwrap()
        .lock()
        .await
        .unwrap();
    let options = AcquireOptions::new().with_wait(Duration::from_millis(1_500));
    let taken = ReentrantLock::new(&waiter, &name)
        .unwrap()
        .acquire(options)
        .await;
    assert!(matches!(taken, Ok(None)), "{taken:?}");
    let mut con = redis.connection();
    assert!(recorded_waits(&mut con, &waiter).is_empty());
    assert!(!waits_script_loaded(&mut con));
    guard.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contended_run_without_cycles_finds_no_deadlock() {
    let secs: u64 = std::env::var("DEADLOCK_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    let redis = TestRedis::any();
    let name = unique_name("soak");
    let detected = Arc::new(AtomicU64::new(0));
    let rounds = Arc::new(AtomicU64::new(0));
    let mut clients = Vec::new();
    for _ in 0..3 {
        let config =
            ClientConfig::new(redis.url()).with_deadlock_detection(Duration::from_millis(40));
        clients.push(Client::with_config(config).await.unwrap());
    }
    let until = tokio::time::Instant::now()
        .checked_add(Duration::from_secs(secs))
        .unwrap_or_else(|| panic!("DEADLOCK_SOAK_SECS={secs} runs past the clock's end"));
    let mut tasks = Vec::new();
    for (c, client) in clients.iter().enumerate() {
        for t in 0..4 {
            let (client, name) = (client.clone(), name.clone());
            let (detected, rounds) = (detected.clone(), rounds.clone());
            tasks.push(tokio::spawn(async move {
                let a = ReentrantLock::new(&client, &format!("{name}:a")).unwrap();
                let b = ReentrantLock::new(&client, &format!("{name}:b")).unwrap();
                let fair = FairLock::new(&client, &format!("{name}:fair")).unwrap();
                let semaphore = Semaphore::new(&client, &format!("{name}:sem"))
                    .unwrap()
                    .with_limit(2)
                    .unwrap();
                let mut n = 0u64;
                while tokio::time::Instant::now() < until {
                    n += 1;
                    // Always in one order, some steps left out: waits, never a cycle.
                    let step = (c + t + n as usize) % 4;
                    let outcome: ferrisson::Result<()> = async {
                        let ga = if step != 1 {
                            Some(a.lock().await?)
                        } else {
                            None
                        };
                        let gb = if step != 2 {
                            Some(b.lock().await?)
                        } else {
                            None
                        };
                        let gf = if step != 3 {
                            Some(fair.lock().await?)
                        } else {
                            None
                        };
                        let permit = semaphore.acquire().await?;
                        tokio::time::sleep(Duration::from_millis(step as u64 * 3)).await;
                        drop((permit, gf, gb, ga));
                        Ok(())
                    }
                    .await;
                    match outcome {
                        Ok(()) => {
                            rounds.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(Error::Deadlock(why)) => {
                            detected.fetch_add(1, Ordering::Relaxed);
                            eprintln!("false deadlock: {why}");
                        }
                        Err(e) => panic!("{e}"),
                    }
                }
            }));
        }
    }
    for task in tasks {
        task.await.unwrap();
    }
    let rounds = rounds.load(Ordering::Relaxed);
    eprintln!("{rounds} rounds in {secs} s");
    assert!(rounds > 12, "the run did work: {rounds} rounds");
    assert_eq!(
        detected.load(Ordering::Relaxed),
        0,
        "a deadlock found where none was"
    );
    // The waits that lasted were on record, and the detection read them.
    assert!(waits_script_loaded(&mut redis.connection()));
}
