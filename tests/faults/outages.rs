//! One outage rule for every call that waits (every lock kind, both semaphores, the latch, the
//! rate limiter, RedLock and MultiLock, `wait_unlocked`): it keeps waiting through a Redis
//! outage up to the client's `wait_outage_limit`, then returns the connection error, within the
//! limit plus one retry interval; a call with a wait bound never overruns it by more than one
//! round trip (a response timeout), even on a frozen server; a first try that cannot reach
//! Redis is the call's error at once, never "busy".
#![allow(clippy::unwrap_used, clippy::panic, clippy::print_stderr)]

use crate::common;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use common::*;
use ferrisson::{
    AcquireOptions, Client, ClientConfig, Error, HoldGuard, Lock, ReentrantLock, RetryPolicy,
};
use ferrisson_expirable_semaphore::ExpirableSemaphore;
use ferrisson_fair_lock::FairLock;
use ferrisson_latch::CountDownLatch;
use ferrisson_multilock::{AnyLock, MultiGuard, MultiLock, RedLock};
use ferrisson_rate_limiter::{RateLimiter, RateType};
use ferrisson_rwlock::ReadWriteLock;
use ferrisson_semaphore::Semaphore;
use ferrisson_spin_lock::SpinLock;
use tokio::time::Instant;

const LIMIT: Duration = Duration::from_secs(2);
const MAX_BACKOFF: Duration = Duration::from_millis(300);
const RESPONSE_TIMEOUT: Duration = Duration::from_millis(800);
/// What a loaded test machine may add to a bound (scheduling, process start-up).
const SLACK: Duration = Duration::from_millis(1_500);
/// The rate limiter's interval: its waiter sleeps until its window gives a permit back, and
/// meets an outage at its next try, at most this long after it began.
const RATE_INTERVAL: Duration = Duration::from_secs(1);

type Call = Pin<Box<dyn Future<Output = Result<(), Error>> + Send>>;

/// How a call ended: its kind, its result, when.
type Ended = (&'static str, Result<(), Error>, Instant);

/// A client whose waits give up after [`LIMIT`] of outage.
async fn waiting_client(url: &str) -> Client {
    waiting_client_for(url, LIMIT).await
}

/// A client whose waits give up after `limit` of outage.
async fn waiting_client_for(url: &str, limit: Duration) -> Client {
    Client::with_config(
        ClientConfig::new(url)
            .with_wait_outage_limit(limit)
            .with_response_timeout(RESPONSE_TIMEOUT)
            .with_connect_timeout(RESPONSE_TIMEOUT)
            .with_retry(RetryPolicy {
                retries: 2,
                backoff: ferrisson::Backoff {
                    min: Duration::from_millis(20),
                    max: MAX_BACKOFF,
                },
            }),
    )
    .await
    .unwrap()
}

/// What the waiters wait for: held by another client.
struct Held {
    _guards: Vec<HoldGuard>,
    _red: MultiGuard,
    _permits: Vec<ferrisson_expirable_semaphore::Permit>,
}

fn boxed<T: Send + 'static>(f: impl Future<Output = Result<T, Error>> + Send + 'static) -> Call {
    Box::pin(async move { f.await.map(drop) })
}

/// A RedLock over three keys of one server (three "instances" that one kill takes down).
fn red_lock(client: &Client, name: &str) -> RedLock {
    RedLock::new(
        (0..3)
            .map(|i| {
                Box::new(ReentrantLock::new(client, &format!("{name}:red{i}")).unwrap())
                    as Box<dyn AnyLock>
            })
            .collect(),
    )
    .unwrap()
}

fn multi_lock(client: &Client, name: &str) -> MultiLock {
    MultiLock::new(
        (0..2)
            .map(|i| {
                Box::new(ReentrantLock::new(client, &format!("{name}:multi{i}")).unwrap())
                    as Box<dyn AnyLock>
            })
            .collect(),
    )
    .unwrap()
}

/// Holds, with `holder`, one of everything the waiting calls of every kind wait for.
async fn hold_everything(holder: &Client, name: &str) -> Held {
    let lock = |suffix: &str| ReentrantLock::new(holder, &format!("{name}:{suffix}")).unwrap();
    let guards = vec![
        lock("lock").lock().await.unwrap(),
        ReentrantLock::fenced(holder, &format!("{name}:fenced"))
            .unwrap()
            .lock()
            .await
            .unwrap(),
        FairLock::new(holder, &format!("{name}:fair"))
            .unwrap()
            .lock()
            .await
            .unwrap(),
        ReadWriteLock::new(holder, &format!("{name}:rw-w"))
            .unwrap()
            .write_lock()
            .lock()
            .await
            .unwrap(),
        ReadWriteLock::new(holder, &format!("{name}:rw-r"))
            .unwrap()
            .read_lock()
            .lock()
            .await
            .unwrap(),
        SpinLock::new(holder, &format!("{name}:spin"))
            .unwrap()
            .lock()
            .await
            .unwrap(),
        lock("watched").lock().await.unwrap(),
        lock("multi1").lock().await.unwrap(),
    ];
    let red = red_lock(holder, name).lock().await.unwrap();
    assert!(
        Semaphore::new(holder, &format!("{name}:sem"))
            .unwrap()
            .try_set_permits(0)
            .await
            .unwrap()
    );
    let expirable = ExpirableSemaphore::new(holder, &format!("{name}:exp"))
        .unwrap()
        .with_limit(1)
        .unwrap();
    let permits = vec![expirable.acquire().await.unwrap()];
    assert!(
        CountDownLatch::new(holder, &format!("{name}:latch"))
            .unwrap()
            .try_set_count(1)
            .await
            .unwrap()
    );
    let limiter = RateLimiter::new(holder, &format!("{name}:rate")).unwrap();
    assert!(
        limiter
            .try_set_rate(RateType::Overall, 1, RATE_INTERVAL)
            .await
            .unwrap()
    );
    assert!(limiter.try_acquire(1).await.unwrap());
    Held {
        _guards: guards,
        _red: red,
        _permits: permits,
    }
}

/// A call of every kind that waits, on `client`, for what [`hold_everything`] holds; each
/// waits as long as it takes (`wait` none) or up to `wait`.
fn waiting_calls(client: &Client, name: &str, wait: Option<Duration>) -> Vec<(&'static str, Call)> {
    let options = wait.map_or(AcquireOptions::new(), |w| {
        AcquireOptions::new().with_wait(w)
    });
    let lock = |suffix: &str| ReentrantLock::new(client, &format!("{name}:{suffix}")).unwrap();
    let mut calls: Vec<(&'static str, Call)> = vec![
        ("reentrant lock", {
            let lock = lock("lock");
            boxed(async move { lock.lock_with(options).await })
        }),
        ("fenced lock", {
            let lock = ReentrantLock::fenced(client, &format!("{name}:fenced")).unwrap();
            boxed(async move { lock.lock_with(options).await })
        }),
        ("fair lock", {
            let lock = FairLock::new(client, &format!("{name}:fair")).unwrap();
            boxed(async move { lock.lock_with(options).await })
        }),
        ("read lock", {
            let lock = ReadWriteLock::new(client, &format!("{name}:rw-w"))
                .unwrap()
                .read_lock();
            boxed(async move { lock.lock_with(options).await })
        }),
        ("write lock", {
            let lock = ReadWriteLock::new(client, &format!("{name}:rw-r"))
                .unwrap()
                .write_lock();
            boxed(async move { lock.lock_with(options).await })
        }),
        ("spin lock", {
            let lock = SpinLock::new(client, &format!("{name}:spin")).unwrap();
            boxed(async move { lock.lock_with(options).await })
        }),
        ("semaphore", {
            let semaphore = Semaphore::new(client, &format!("{name}:sem")).unwrap();
            match wait {
                Some(w) => boxed(async move {
                    semaphore
                        .try_acquire_with(AcquireOptions::new().with_wait(w))
                        .await
                }),
                None => boxed(async move { semaphore.acquire().await }),
            }
        }),
        ("expirable semaphore", {
            let semaphore = ExpirableSemaphore::new(client, &format!("{name}:exp"))
                .unwrap()
                .with_limit(1)
                .unwrap();
            match wait {
                Some(w) => boxed(async move {
                    semaphore
                        .try_acquire_with(AcquireOptions::new().with_wait(w))
                        .await
                }),
                None => boxed(async move { semaphore.acquire().await }),
            }
        }),
        ("latch", {
            let latch = CountDownLatch::new(client, &format!("{name}:latch")).unwrap();
            match wait {
                Some(w) => boxed(async move { latch.wait_for(w).await }),
                None => boxed(async move { latch.wait().await }),
            }
        }),
        ("rate limiter", {
            let limiter = RateLimiter::new(client, &format!("{name}:rate")).unwrap();
            boxed(async move {
                match wait {
                    Some(w) => {
                        limiter
                            .try_acquire_with(1, AcquireOptions::new().with_wait(w))
                            .await
                    }
                    None => limiter.acquire(1).await.map(|()| true),
                }
            })
        }),
        ("redlock", {
            let lock = red_lock(client, name);
            boxed(async move { lock.lock_with(options).await })
        }),
        ("multilock", {
            let lock = multi_lock(client, name);
            boxed(async move { lock.lock_with(options).await })
        }),
    ];
    if wait.is_none() {
        let watched = lock("watched");
        calls.push((
            "wait_unlocked",
            Box::pin(async move { watched.wait_unlocked().await }),
        ));
    }
    calls
}

/// Runs every call in a task of its own, each reporting when it ended.
fn spawn_all(calls: Vec<(&'static str, Call)>) -> Vec<tokio::task::JoinHandle<Ended>> {
    calls
        .into_iter()
        .map(|(kind, call)| {
            tokio::spawn(async move {
                let result = call.await;
                (kind, result, Instant::now())
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_waiting_call_returns_the_connection_error_at_the_outage_limit() {
    let mut server = RedisServer::spawn();
    let holder = client(&server.url()).await;
    let waiter = waiting_client(&server.url()).await;
    let name = unique_name("outage");
    let held = hold_everything(&holder, &name).await;
    let tasks = spawn_all(waiting_calls(&waiter, &name, None));
    // Every call past its first try: the subscribing kinds registered, the others had time.
    eventually(Duration::from_secs(10), "the waiters wait", || async {
        waiter.waiter_stats().1 >= 11
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    for task in &tasks {
        assert!(!task.is_finished(), "a call ended before the outage");
    }
    // Read before the kill: a waiter may notice the outage before `stop` has seen the process
    // exit (on a busy machine, long before).
    let killed = Instant::now();
    server.stop();
    let ended = join_within(Duration::from_secs(30), "every waiting call ends", tasks).await;
    for (kind, result, at) in ended {
        // A rate limiter's waiter sleeps until its window gives back a permit: it meets the
        // outage at that try.
        let noticed = if kind == "rate limiter" {
            RATE_INTERVAL
        } else {
            Duration::ZERO
        };
        let most = LIMIT + MAX_BACKOFF + SLACK + noticed;
        let after = at - killed;
        // The table docs/guarantees.md §4 quotes (shown with --nocapture).
        eprintln!(
            "outage rule: {kind:<20} gave up {:>6.2} s into the outage",
            after.as_secs_f64()
        );
        let err = result
            .err()
            .unwrap_or_else(|| panic!("{kind}: got in without Redis"));
        assert!(
            err.is_connection_error(),
            "{kind}: ended with {err} ({err:?}), not the connection error"
        );
        assert!(
            matches!(&err, Error::Unreachable { address, .. } if address.contains(&server.port().to_string())),
            "{kind}: the error names no address: {err}"
        );
        assert!(
            after >= LIMIT - Duration::from_millis(50),
            "{kind}: gave up {after:?} into the outage, before its limit of {LIMIT:?}"
        );
        assert!(
            after <= most,
            "{kind}: gave up {after:?} into the outage, past its limit of {LIMIT:?} plus a retry interval ({most:?} with slack)"
        );
    }
    drop(held);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waits_go_on_through_an_outage_shorter_than_the_limit() {
    let mut server = RedisServer::spawn();
    let holder = client(&server.url()).await;
    let waiter = Client::with_config(
        ClientConfig::new(server.url())
            .with_wait_outage_limit(Duration::from_secs(20))
            .with_response_timeout(RESPONSE_TIMEOUT)
            .with_connect_timeout(RESPONSE_TIMEOUT),
    )
    .await
    .unwrap();
    let name = unique_name("outage-short");
    let _held = ReentrantLock::new(&holder, &name)
        .unwrap()
        .lock()
        .await
        .unwrap();
    let _permit = Semaphore::new(&holder, &format!("{name}:sem"))
        .unwrap()
        .with_limit(1)
        .unwrap()
        .acquire()
        .await
        .unwrap();
    let latch = CountDownLatch::new(&holder, &format!("{name}:latch")).unwrap();
    assert!(latch.try_set_count(1).await.unwrap());
    let tasks = spawn_all(vec![
        ("reentrant lock", {
            let lock = ReentrantLock::new(&waiter, &name).unwrap();
            boxed(async move { lock.lock().await })
        }),
        ("semaphore with a limit", {
            let semaphore = Semaphore::new(&waiter, &format!("{name}:sem"))
                .unwrap()
                .with_limit(1)
                .unwrap();
            boxed(async move { semaphore.acquire().await.map(|p| p.forget()) })
        }),
        ("latch", {
            let latch = CountDownLatch::new(&waiter, &format!("{name}:latch")).unwrap();
            boxed(async move { latch.wait().await })
        }),
    ]);
    eventually(Duration::from_secs(10), "the waiters wait", || async {
        waiter.waiter_stats().1 >= 3
    })
    .await;
    // Down for three seconds, back without its data: the lock, the permit and the latch's
    // count are gone. Every wait goes on through the outage and ends: the lock's and the
    // semaphore's with what they waited for, the latch's with `LatchLost` (a barrier that
    // data loss opened would release it early).
    server.stop();
    tokio::time::sleep(Duration::from_secs(3)).await;
    server.start();
    for (kind, result, _) in join_within(Duration::from_secs(30), "every wait ends", tasks).await {
        if kind == "latch" {
            assert!(
                matches!(result, Err(Error::LatchLost(_))),
                "{kind}: {result:?}"
            );
        } else {
            assert!(result.is_ok(), "{kind}: {result:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bounded_wait_never_overruns_by_more_than_a_response_timeout_and_a_dead_redis_is_an_error()
 {
    let mut server = RedisServer::spawn();
    let holder = client(&server.url()).await;
    let waiter = waiting_client(&server.url()).await;
    let name = unique_name("outage-bound");
    let held = hold_everything(&holder, &name).await;
    let wait = Duration::from_secs(1);

    // A frozen server: tries get no reply. Each call ends within its wait plus one response
    // timeout, with the connection error.
    server.pause();
    let started = Instant::now();
    let ended = join_within(
        Duration::from_secs(30),
        "every bounded call ends",
        spawn_all(waiting_calls(&waiter, &name, Some(wait))),
    )
    .await;
    server.resume();
    for (kind, result, at) in ended {
        let took = at - started;
        eprintln!(
            "frozen server: {kind:<20} a 1 s wait ended after {:>5.2} s",
            took.as_secs_f64()
        );
        assert!(
            took <= wait + RESPONSE_TIMEOUT + SLACK,
            "{kind}: a wait of {wait:?} took {took:?} on a frozen server"
        );
        let err = result
            .err()
            .unwrap_or_else(|| panic!("{kind}: got in on a frozen server"));
        assert!(err.is_connection_error(), "{kind}: {err}");
    }

    // A dead server: the first try fails at once, and that is the call's answer (not "busy",
    // not a wait to the end of the bound).
    drop(held);
    server.stop();
    every_call_reports_a_dead_server(
        &waiter,
        &name,
        Duration::from_secs(5),
        Duration::from_secs(3),
        "dead server",
    )
    .await;
}

/// Every waiting call of `client` on `name`, with a wait of `wait`, against a server that is
/// down: each ends with a connection error (never "busy", never in), within `within` of its
/// start. `label` heads each call's printed timing.
async fn every_call_reports_a_dead_server(
    client: &Client,
    name: &str,
    wait: Duration,
    within: Duration,
    label: &str,
) {
    let started = Instant::now();
    let ended = join_within(
        wait.saturating_mul(6),
        "every call on a dead server ends",
        spawn_all(waiting_calls(client, name, Some(wait))),
    )
    .await;
    for (kind, result, at) in ended {
        let took = at - started;
        eprintln!(
            "{label}: {kind:<20} reported it after {:>5.2} s",
            took.as_secs_f64()
        );
        let err = result
            .err()
            .unwrap_or_else(|| panic!("{kind}: got in with Redis down"));
        assert!(err.is_connection_error(), "{kind}: {err}");
        assert!(
            took < within,
            "{kind}: took {took:?} to report a dead server, of a {wait:?} wait (bound: {within:?})"
        );
    }
}

/// With the client's default settings, a first try that cannot reach Redis (the server
/// stopped, or killed with the client's connection open) is the call's error within the
/// connect and response timeouts, not after its wait; and an `unlock` of a hold whose fixed
/// lease the client already knows has run out answers `LeaseLost` at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_default_settings_a_dead_redis_is_the_error_in_time() {
    let mut server = RedisServer::spawn();
    let client = client(&server.url()).await;
    let name = unique_name("dead-default");
    let config = client.config().clone();
    let patience = config
        .connect_timeout()
        .saturating_add(config.response_timeout());
    // A hold whose fixed lease runs out while Redis is down.
    let lock = ReentrantLock::new(&client, &format!("{name}-leased")).unwrap();
    let leased = lock
        .lock_with(AcquireOptions::new().with_lease(Duration::from_millis(200)))
        .await
        .unwrap();
    // Every kind's connections are open and warm.
    let held = hold_everything(&client, &format!("{name}-warm")).await;
    drop(held);
    client.shutdown().await.ok();
    let client = common::client(&server.url()).await;
    let _warm = hold_everything(&client, &format!("{name}-warm2")).await;
    server.stop();
    every_call_reports_a_dead_server(
        &client,
        &name,
        Duration::from_secs(10),
        patience.saturating_add(SLACK),
        "dead server, default settings",
    )
    .await;
    // Its fixed lease of 200 ms runs out by the client's clock (the watchdog says so).
    eventually(
        Duration::from_secs(5),
        "the fixed lease is known lost",
        || {
            let lost = leased.is_lost();
            async move { lost }
        },
    )
    .await;
    let started = Instant::now();
    let err = leased.unlock().await.unwrap_err();
    assert!(matches!(err, Error::LeaseLost(_)), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_millis(100),
        "a hold known lost answered after {:?}",
        started.elapsed()
    );
}

/// A MultiLock's round is made of its locks' own waits, which wait out an outage themselves: a
/// round that reached Redis and then met an outage (the first round included) follows the
/// outage rule, counted from when the outage began, not from when the round began. Here the
/// outage begins 2.5 s into a round whose first lock waits up to 3 s, and lasts 3.5 s of a
/// 5 s limit: counted from the round's start, the limit would pass 1 s before Redis is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multilock_round_that_meets_an_outage_waits_it_out() {
    const OUTAGE_LIMIT: Duration = Duration::from_secs(5);
    let mut server = RedisServer::spawn();
    let holder = client(&server.url()).await;
    let waiter = waiting_client_for(&server.url(), OUTAGE_LIMIT).await;
    let name = unique_name("outage-mid-round");
    // The group's first lock is held: the first round waits for it (up to 1.5 s per lock of
    // the group, 3 s).
    let _held = ReentrantLock::new(&holder, &format!("{name}:multi0"))
        .unwrap()
        .lock()
        .await
        .unwrap();
    let tasks = spawn_all(vec![("multilock", {
        let lock = multi_lock(&waiter, &name);
        boxed(async move { lock.lock().await })
    })]);
    eventually(Duration::from_secs(10), "the MultiLock waits", || async {
        waiter.waiter_stats().1 >= 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    // Down for 3.5 s and back without its data: the held lock is gone.
    server.stop();
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    server.start();
    for (kind, result, _) in join_within(Duration::from_secs(30), "the MultiLock ends", tasks).await
    {
        assert!(
            result.is_ok(),
            "{kind}: gave up within an outage shorter than its limit: {result:?}"
        );
    }
}
