//! MultiLock over locks of different kinds and clients, and RedLock over 3 and 5 independent
//! redis-server processes, with instances frozen and killed.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::*;
use ferrisson::{AcquireOptions, Client, ClientConfig, Error, Lock, ReentrantLock};
use ferrisson_fair_lock::FairLock;
use ferrisson_multilock::{AnyLock, MultiLock, RedLock};
use ferrisson_rwlock::ReadWriteLock;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multilock_over_three_kinds_and_clients_takes_and_releases_them_all() {
    let redis = TestRedis::any();
    let (a, b, c) = (
        client(&redis.url()).await,
        client(&redis.url()).await,
        client(&redis.url()).await,
    );
    let (fair, rw, plain) = (
        unique_name("multi-fair"),
        unique_name("multi-rw"),
        unique_name("multi-plain"),
    );
    let make = || -> Vec<Box<dyn AnyLock>> {
        vec![
            Box::new(FairLock::new(&a, &fair).unwrap()),
            Box::new(ReadWriteLock::new(&b, &rw).unwrap().write_lock()),
            Box::new(ReentrantLock::new(&c, &plain).unwrap()),
        ]
    };
    assert!(MultiLock::new(Vec::new()).is_err());
    let multi = MultiLock::new(make()).unwrap();
    let guard = multi.lock().await.unwrap();
    assert_eq!(guard.holds().len(), 3);
    assert!(FairLock::new(&a, &fair).unwrap().is_locked().await.unwrap());
    assert!(
        ReentrantLock::new(&c, &plain)
            .unwrap()
            .is_locked()
            .await
            .unwrap()
    );
    let other = MultiLock::new(make()).unwrap();
    assert!(other.try_lock().await.unwrap().is_none());
    guard.unlock().await.unwrap();
    for key in [&fair, &rw, &plain] {
        let exists: bool = redis::cmd("EXISTS")
            .arg(key)
            .query(&mut redis.connection())
            .unwrap();
        assert!(!exists, "{key} released");
    }

    // One lock held elsewhere: a bounded try fails and leaves nothing taken.
    let outsider = ReentrantLock::new(&c, &plain)
        .unwrap()
        .lock()
        .await
        .unwrap();
    let got = other
        .try_lock_with(AcquireOptions::new().with_wait(Duration::from_millis(300)))
        .await
        .unwrap();
    assert!(got.is_none());
    assert!(!FairLock::new(&a, &fair).unwrap().is_locked().await.unwrap());
    outsider.unlock().await.unwrap();
    // A lease for all.
    let leased = other
        .lock_with(AcquireOptions::new().with_lease(Duration::from_millis(300)))
        .await
        .unwrap();
    let lost = tokio::time::timeout(Duration::from_secs(5), leased.lost())
        .await
        .unwrap();
    assert_eq!(lost, ferrisson::LossReason::LeaseExpired);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multilocks_asking_in_opposite_orders_all_get_through() {
    let redis = TestRedis::any();
    let (a, b) = (client(&redis.url()).await, client(&redis.url()).await);
    let (x, y) = (unique_name("order-x"), unique_name("order-y"));
    let inside = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..4 {
        let (first, second) = if i % 2 == 0 { (&x, &y) } else { (&y, &x) };
        let client = if i % 2 == 0 { &a } else { &b };
        let multi = MultiLock::new(vec![
            Box::new(ReentrantLock::new(client, first).unwrap()),
            Box::new(ReentrantLock::new(client, second).unwrap()),
        ])
        .unwrap();
        let inside = inside.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..5 {
                let guard = multi
                    .lock_with(AcquireOptions::new().with_wait(Duration::from_secs(30)))
                    .await
                    .unwrap();
                assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                tokio::time::sleep(Duration::from_millis(3)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                guard.unlock().await.unwrap();
            }
        }));
    }
    join_within(Duration::from_secs(60), "no deadlock", tasks).await;
}

struct Instances {
    servers: Vec<RedisServer>,
}

impl Instances {
    fn spawn(n: usize) -> Self {
        Self {
            servers: (0..n).map(|_| RedisServer::spawn()).collect(),
        }
    }

    async fn clients(&self, lease: Duration) -> Vec<Client> {
        let mut clients = Vec::new();
        for server in &self.servers {
            clients.push(instance_client(server.url(), lease, Duration::from_millis(500)).await);
        }
        clients
    }
}

/// A client of one instance, whose response and connect timeouts are `timeout`.
async fn instance_client(url: String, lease: Duration, timeout: Duration) -> Client {
    Client::with_config(
        ClientConfig::new(url)
            .with_lease(lease)
            .with_response_timeout(timeout)
            .with_connect_timeout(timeout),
    )
    .await
    .unwrap()
}

fn red_lock(clients: &[Client], name: &str, fenced: bool) -> RedLock {
    RedLock::new(
        clients
            .iter()
            .map(|c| {
                let lock = if fenced {
                    ReentrantLock::fenced(c, name)
                } else {
                    ReentrantLock::new(c, name)
                };
                Box::new(lock.unwrap()) as Box<dyn AnyLock>
            })
            .collect(),
    )
    .unwrap()
}

/// Waits (a few seconds at most) until no instance holds `name`: an unlock returns once a
/// quorum released, and the last instance's release may land a moment after.
async fn released_everywhere(instances: &Instances, name: &str) {
    eventually(Duration::from_secs(5), "nobody holds the lock", || async {
        instances.servers.iter().all(|s| !held_on(s, name))
    })
    .await;
}

fn held_on(server: &RedisServer, name: &str) -> bool {
    redis::cmd("EXISTS")
        .arg(name)
        .query::<bool>(&mut server.connection())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redlock_over_three_locks_with_a_minority_down_never_with_a_majority() {
    let mut instances = Instances::spawn(3);
    let clients = instances.clients(Duration::from_secs(30)).await;
    let others = instances.clients(Duration::from_secs(30)).await;
    let name = unique_name("redlock");
    let lock = red_lock(&clients, &name, true);
    let rival = red_lock(&others, &name, true);
    assert_eq!(lock.quorum(), 2);

    let guard = lock.lock().await.unwrap();
    assert_eq!(guard.holds().len(), 3);
    assert!(
        rival.try_lock().await.unwrap().is_none(),
        "never two holders"
    );
    let token = guard.token().unwrap();
    guard.unlock().await.unwrap();
    released_everywhere(&instances, &name).await;

    // One instance frozen: the quorum still locks, within its share of the time.
    instances.servers[0].pause();
    let guard = rival
        .try_lock_with(AcquireOptions::new().with_wait(Duration::from_secs(3)))
        .await
        .unwrap()
        .expect("a minority frozen still locks");
    assert_eq!(guard.holds().len(), 2);
    assert!(guard.token().unwrap() > token, "tokens grow across holders");
    assert!(lock.try_lock().await.unwrap().is_none());
    guard.unlock().await.unwrap();
    instances.servers[0].resume();

    // Two of three killed: never locks (the first round cannot reach a quorum: the connection
    // error, not "busy"), and leaves nothing on the live one.
    instances.servers[1].stop();
    instances.servers[2].stop();
    let got = lock
        .try_lock_with(AcquireOptions::new().with_wait(Duration::from_secs(1)))
        .await;
    assert!(
        matches!(&got, Err(e) if e.is_connection_error()),
        "a majority down never locks: {got:?}"
    );
    assert!(
        !held_on(&instances.servers[0], &name),
        "partial grants released"
    );
}

/// RedLocks of three processes (three client sets) contending for one lock on three
/// instances, each with several tasks: never two holders at once, and the fenced guards'
/// tokens grow strictly from one holder to the next, across processes (the instances share
/// this machine's clock: the case guarantees.md §12 promises it for, clocks that agree to
/// within the time between two holders).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlocks_of_three_processes_never_both_hold_and_tokens_grow() {
    const PROCESSES: usize = 3;
    const TASKS: usize = 3;
    const EACH: usize = 8;
    let instances = Instances::spawn(3);
    let name = unique_name("redlock-contend");
    let inside = Arc::new(AtomicUsize::new(0));
    let last_token = Arc::new(std::sync::Mutex::new(0u64));
    let mut tasks = Vec::new();
    for _ in 0..PROCESSES {
        let clients = instances.clients(Duration::from_secs(30)).await;
        for _ in 0..TASKS {
            let lock = red_lock(&clients, &name, true);
            let (inside, last_token) = (inside.clone(), last_token.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..EACH {
                    let guard = lock.lock().await.unwrap();
                    assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                    let token = guard.token().expect("fenced");
                    {
                        let mut last = last_token.lock().unwrap();
                        assert!(token > *last, "token {token} after {}", *last);
                        *last = token;
                    }
                    tokio::task::yield_now().await;
                    inside.fetch_sub(1, Ordering::SeqCst);
                    guard.unlock().await.unwrap();
                }
            }));
        }
    }
    join_within(
        Duration::from_secs(60),
        "every task gets the lock its share of times",
        tasks,
    )
    .await;
    released_everywhere(&instances, &name).await;
}

/// Slow instances that the quorum needs shorten a RedLock's validity by the time the round
/// waited for them: the guard comes back with the lease less that time and the drift
/// allowance left, no more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_instance_shortens_the_redlock_validity_by_the_time_it_took() {
    const SLOW: Duration = Duration::from_millis(300);
    let instances = Instances::spawn(3);
    let slow = ferrisson_testkit::FaultProxy::start(instances.servers[1].port());
    let proxy = ferrisson_testkit::FaultProxy::start(instances.servers[2].port());
    // Two instances through a proxy each (a quorum needs one of them), with room in their
    // response timeout for the delay.
    let mut clients = Vec::new();
    for url in [instances.servers[0].url(), slow.url(), proxy.url()] {
        clients.push(
            instance_client(url, Duration::from_secs(30), Duration::from_millis(1_000)).await,
        );
    }
    let name = unique_name("redlock-slow");
    let lock = red_lock(&clients, &name, false);
    // The scripts cached and the connections up before the instance turns slow.
    lock.lock().await.unwrap().unlock().await.unwrap();
    slow.delay_replies(SLOW);
    proxy.delay_replies(SLOW);
    let lease = Duration::from_secs(10);
    let started = tokio::time::Instant::now();
    let guard = lock
        .lock_with(AcquireOptions::new().with_lease(lease))
        .await
        .unwrap();
    let returned = tokio::time::Instant::now();
    assert_eq!(guard.holds().len(), 3, "the slow instance granted too");
    assert!(returned - started >= SLOW, "the round waited for it");
    // Drift allowance: 1 % of the lease + 2 ms.
    let drift = lease / 100 + Duration::from_millis(2);
    let left = guard
        .valid_until()
        .unwrap()
        .saturating_duration_since(returned);
    let most = lease
        .checked_sub(SLOW + drift)
        .expect("the lease outlasts the delay and the drift allowance");
    assert!(
        left <= most,
        "{left:?} of validity left after waiting {:?} for the slow instance",
        returned - started
    );
    let least = lease
        .checked_sub(returned - started + drift + Duration::from_millis(50))
        .expect("the round took less than the lease (else the guard would not be valid)");
    assert!(
        left >= least,
        "{left:?} of validity left, at least {least:?} expected"
    );
    slow.delay_replies(Duration::ZERO);
    proxy.delay_replies(Duration::ZERO);
    guard.unlock().await.unwrap();
    released_everywhere(&instances, &name).await;
}

/// A slow instance beyond the quorum is not waited for: the round returns once a quorum
/// granted and the others had twice that time (at least 10 ms), with the quorum's holds, and
/// the slow instance's late grant is given up (the lock is not left held there).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_instance_beyond_the_quorum_is_not_waited_for() {
    const SLOW: Duration = Duration::from_millis(1_000);
    let instances = Instances::spawn(3);
    let proxy = ferrisson_testkit::FaultProxy::start(instances.servers[2].port());
    let mut clients = Vec::new();
    for url in [
        instances.servers[0].url(),
        instances.servers[1].url(),
        proxy.url(),
    ] {
        clients.push(
            instance_client(url, Duration::from_secs(30), Duration::from_millis(3_000)).await,
        );
    }
    let name = unique_name("redlock-beyond");
    let lock = red_lock(&clients, &name, false);
    lock.lock().await.unwrap().unlock().await.unwrap();
    proxy.delay_replies(SLOW);
    let started = tokio::time::Instant::now();
    let guard = lock.lock().await.unwrap();
    let took = started.elapsed();
    assert_eq!(guard.holds().len(), 2, "the quorum's holds");
    assert!(
        took < SLOW,
        "the round waited {took:?} for the slow instance"
    );
    // The slow instance's grant, when it comes, is undone.
    eventually(
        Duration::from_secs(10),
        "the slow instance not left held",
        || async { !held_on(&instances.servers[2], &name) },
    )
    .await;
    guard.unlock().await.unwrap();
    proxy.delay_replies(Duration::ZERO);
    released_everywhere(&instances, &name).await;
}

/// A round split by a rival (one instance granted, one held elsewhere) must not hold its
/// grant while it waits for the third instance when that one cannot answer: an instance that
/// gave no answer in the round before (a server down or frozen) gets only the grace of a
/// decided round once the others have answered. Otherwise rival RedLocks, each holding one
/// instance, wait for it round after round (#56: single acquires of tens of seconds with one
/// server of three down).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_round_does_not_wait_for_an_instance_that_is_down_or_did_not_answer() {
    let patience = Duration::from_secs(3);
    for frozen in [false, true] {
        let mut instances = Instances::spawn(3);
        let mut clients = Vec::new();
        for server in &instances.servers {
            clients.push(instance_client(server.url(), Duration::from_secs(30), patience).await);
        }
        let name = unique_name("redlock-split");
        let lock = red_lock(&clients, &name, false);
        lock.lock().await.unwrap().unlock().await.unwrap();
        // A rival holds instance 1 alone; instance 0 is free; instance 2 cannot answer.
        let rival = ReentrantLock::new(&clients[1], &name).unwrap();
        let rival = rival.owned_by(clients[1].new_owner()).lock().await.unwrap();
        if frozen {
            instances.servers[2].pause();
        } else {
            instances.servers[2].stop();
        }
        // The first round meets the instance gone: it may wait its bound for it, and its answer
        // is the others' (a refusal), not the missing instance's error.
        assert!(lock.try_lock().await.unwrap().is_none(), "frozen: {frozen}");
        let started = tokio::time::Instant::now();
        assert!(lock.try_lock().await.unwrap().is_none(), "no quorum");
        let took = started.elapsed();
        assert!(
            took < Duration::from_millis(250),
            "a split round waited {took:?} for an instance that is down or frozen (frozen: {frozen})"
        );
        assert!(
            !held_on(&instances.servers[0], &name),
            "the split round's grant is given back"
        );
        rival.unlock().await.unwrap();
        if frozen {
            instances.servers[2].resume();
        } else {
            instances.servers[2].start();
        }
        // Back, the instance answers the rounds again.
        let guard = lock.lock().await.unwrap();
        guard.unlock().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redlock_over_five_validity_and_loss_of_the_quorum() {
    let mut instances = Instances::spawn(5);
    let clients = instances.clients(Duration::from_millis(1_500)).await;
    let name = unique_name("redlock5");
    let lock = red_lock(&clients, &name, false);
    assert_eq!(lock.quorum(), 3);
    // A fixed lease: valid for the lease less the time spent and the drift.
    let started = tokio::time::Instant::now();
    let guard = lock
        .lock_with(AcquireOptions::new().with_lease(Duration::from_secs(10)))
        .await
        .unwrap();
    let valid = guard.valid_until().unwrap();
    let lease_end = started
        .checked_add(Duration::from_secs(10))
        .expect("the lease's end is within the clock's range");
    assert!(valid < lease_end);
    assert!(valid > tokio::time::Instant::now());
    guard.unlock().await.unwrap();

    // Kept by the watchdogs; two instances down is still a quorum; a third loses it.
    instances.servers[3].stop();
    instances.servers[4].stop();
    let guard = lock.lock().await.unwrap();
    assert_eq!(guard.holds().len(), 3);
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    assert!(guard.ensure_held().is_ok(), "renewed on the quorum");
    instances.servers[2].stop();
    let reason = tokio::time::timeout(Duration::from_secs(10), guard.lost())
        .await
        .unwrap_or_else(|_| panic!("no loss signal when the quorum went"));
    assert!(guard.ensure_held().is_err(), "{reason:?}");
    // Unlock skips the instances that are down, and says the guard was lost.
    assert!(matches!(
        guard.unlock().await,
        Err(ferrisson::Error::LeaseLost(_))
    ));
    assert!(!held_on(&instances.servers[0], &name));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_named_locks_on_two_servers_in_opposite_orders_get_through_by_retrying() {
    // The key order cannot settle this one (both locks are named alike): the short waits while
    // holding, and the random pauses between rounds, do.
    let instances = Instances::spawn(2);
    let name = unique_name("same-name");
    let inside = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..2 {
        let clients = instances.clients(Duration::from_secs(30)).await;
        let order: Vec<&Client> = if i == 0 {
            vec![&clients[0], &clients[1]]
        } else {
            vec![&clients[1], &clients[0]]
        };
        let multi = MultiLock::new(
            order
                .into_iter()
                .map(|c| Box::new(ReentrantLock::new(c, &name).unwrap()) as Box<dyn AnyLock>)
                .collect(),
        )
        .unwrap();
        let inside = inside.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..3 {
                let guard = multi
                    .lock_with(AcquireOptions::new().with_wait(Duration::from_secs(30)))
                    .await
                    .unwrap();
                assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                tokio::time::sleep(Duration::from_millis(20)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                guard.unlock().await.unwrap();
            }
        }));
    }
    join_within(Duration::from_secs(60), "no deadlock", tasks).await;
}

/// Script calls (`EVALSHA`, `EVAL`) `server` has run so far.
fn script_calls(server: &RedisServer) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut server.connection())
        .unwrap();
    let calls = ferrisson_testkit::parse_command_calls(&info);
    ["evalsha", "eval"]
        .iter()
        .map(|c| calls.get(*c).copied().unwrap_or(0))
        .sum()
}

/// A RedLock waiting for a held lock does not poll: after a round refused by the holder it
/// waits for a release message from an instance that refused, and takes the lock once the
/// holder releases. (Rounds retried after blind random pauses, as before, made over a dozen script
/// calls per instance in the second this test holds the lock; a watch makes one or two.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_redlock_sleeps_until_a_release_instead_of_polling() {
    let instances = Instances::spawn(3);
    let holder_clients = instances.clients(Duration::from_secs(30)).await;
    let waiter_clients = instances.clients(Duration::from_secs(30)).await;
    let name = unique_name("redlock-wait");
    let holder = red_lock(&holder_clients, &name, false);
    let waiter = red_lock(&waiter_clients, &name, false);
    let guard = holder.lock().await.unwrap();
    let before: Vec<u64> = instances.servers.iter().map(script_calls).collect();
    let waiting = tokio::spawn(async move {
        let guard = waiter.lock().await.unwrap();
        guard.holds().len()
    });
    // Its first round reaches every instance (and is refused).
    eventually(
        Duration::from_secs(10),
        "the waiter's first round",
        || async {
            instances
                .servers
                .iter()
                .zip(&before)
                .all(|(s, b)| script_calls(s) > *b)
        },
    )
    .await;
    let first: Vec<u64> = instances.servers.iter().map(script_calls).collect();
    tokio::time::sleep(Duration::from_secs(1)).await;
    for (server, first) in instances.servers.iter().zip(&first) {
        // The watch's look after it subscribed, and one more when the subscription was
        // confirmed only after that look (a release message could have come unheard before:
        // the waiter looks again within `UNCONFIRMED_RECHECK`, 500 ms, as a loaded machine's
        // CI run showed).
        let more = script_calls(server) - first;
        assert!(
            more <= 2,
            "the waiter kept trying while the lock was held: {more} script calls"
        );
    }
    assert!(!waiting.is_finished(), "never two holders");
    guard.unlock().await.unwrap();
    let holds = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the waiter takes the lock after the release")
        .unwrap();
    assert_eq!(holds, 3);
}

/// RedLock waiters of one process take turns: only the first to find the lock held watches and
/// retries, the others queue behind it (every RedLock over the same locks of the same clients
/// shares the queue), most of them without a first round, so a release costs the instances one
/// waiter's round, not one per waiter. (With every waiter retrying at each release, twelve
/// waiters cost each instance 90 script calls here; in turns, 49 at most: twelve first rounds,
/// then three calls per waiter.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_waiters_of_one_process_take_turns() {
    const WAITERS: usize = 12;
    let instances = Instances::spawn(3);
    let holder_clients = instances.clients(Duration::from_secs(30)).await;
    let waiter_clients = instances.clients(Duration::from_secs(30)).await;
    let name = unique_name("redlock-turns");
    let guard = red_lock(&holder_clients, &name, false)
        .lock()
        .await
        .unwrap();
    let before: Vec<u64> = instances.servers.iter().map(script_calls).collect();
    let holders = Arc::new(AtomicUsize::new(0));
    let started = Arc::new(AtomicUsize::new(0));
    let mut waiters = Vec::new();
    for _ in 0..WAITERS {
        // A RedLock of its own, over the same locks: the turns are shared all the same.
        let lock = red_lock(&waiter_clients, &name, false);
        let (holders, started) = (holders.clone(), started.clone());
        waiters.push(tokio::spawn(async move {
            started.fetch_add(1, Ordering::SeqCst);
            let guard = lock.lock().await.unwrap();
            assert_eq!(holders.fetch_add(1, Ordering::SeqCst), 0, "one holder");
            tokio::time::sleep(Duration::from_millis(5)).await;
            holders.fetch_sub(1, Ordering::SeqCst);
            guard.unlock().await.unwrap();
        }));
    }
    // Every waiter has asked, and the first refused watches the instance it refused.
    eventually(Duration::from_secs(10), "the waiters wait", || async {
        started.load(Ordering::SeqCst) == WAITERS && watched(&instances.servers[0], &name)
    })
    .await;
    guard.unlock().await.unwrap();
    join_within(
        Duration::from_secs(30),
        "every waiter gets the lock",
        waiters,
    )
    .await;
    for (server, before) in instances.servers.iter().zip(&before) {
        let calls = script_calls(server) - before;
        // First rounds, then per waiter a refused round when its turn comes, the look of its
        // watch at the instance it watches (a script: looks refuse a foreign key), the round
        // that takes the lock and its release; a little slack for a round that split.
        let bound = (WAITERS * 6) as u64;
        assert!(
            calls <= bound,
            "{calls} script calls on an instance for {WAITERS} waiters (at most {bound} in turns)"
        );
    }
}

/// Whether a client subscribes to the release messages of lock `name` on `server`.
fn watched(server: &RedisServer, name: &str) -> bool {
    let reply: Vec<redis::Value> = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(ferrisson_testkit::redisson_name(
            "redisson_lock__channel",
            name,
        ))
        .query(&mut server.connection())
        .unwrap();
    matches!(reply.get(1), Some(redis::Value::Int(n)) if *n > 0)
}

/// An unlock hands a RedLock straight to an acquisition of the same process waiting for it:
/// each instance's hold goes to the waiter in the release's own script call (one call per
/// instance, nothing published, no round of the waiter's), under a fresh owner and, fenced, a
/// larger token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redlock_unlock_hands_the_lock_to_a_waiter_of_the_process() {
    let instances = Instances::spawn(3);
    let clients = instances.clients(Duration::from_secs(30)).await;
    let name = unique_name("redlock-handoff");
    let holder = red_lock(&clients, &name, true);
    // The servers cache the scripts first, so that each call below is one `EVALSHA`.
    holder.lock().await.unwrap().unlock().await.unwrap();
    let guard = holder.lock().await.unwrap();
    let first_token = guard.token().unwrap();
    let before: Vec<u64> = instances.servers.iter().map(script_calls).collect();
    let waiter = red_lock(&clients, &name, true);
    let waiting = tokio::spawn(async move { waiter.lock().await.unwrap() });
    // Refused (a call on every instance), it has queued for a hand-off, then watches an
    // instance for the release.
    eventually(Duration::from_secs(10), "the waiter watching", || async {
        instances
            .servers
            .iter()
            .zip(&before)
            .all(|(s, b)| script_calls(s) > *b)
            && instances.servers.iter().any(|s| watched(s, &name))
    })
    .await;
    // Its place in the process's queue is no channel of Redis's: nothing subscribed for it.
    for server in &instances.servers {
        let channels: Vec<Vec<u8>> = redis::cmd("PUBSUB")
            .arg("CHANNELS")
            .query(&mut server.connection())
            .unwrap();
        assert!(
            channels
                .iter()
                .all(|c| !c.windows(5).any(|w| w == b"local")),
            "a local channel reached the server: {channels:?}"
        );
    }
    let holder_owners: Vec<String> = guard
        .holds()
        .iter()
        .map(|h| h.owner().to_string())
        .collect();
    let at_unlock: Vec<u64> = instances.servers.iter().map(script_calls).collect();
    guard.unlock().await.unwrap();
    let handed = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the waiter gets the lock")
        .unwrap();
    for (server, at_unlock) in instances.servers.iter().zip(&at_unlock) {
        assert_eq!(
            script_calls(server) - at_unlock,
            1,
            "the release itself passed the lock on, no round of the waiter's"
        );
        assert!(held_on(server, &name), "the lock never came free");
    }
    assert_eq!(handed.holds().len(), 3);
    for (hold, previous) in handed.holds().iter().zip(&holder_owners) {
        assert_ne!(&hold.owner().to_string(), previous, "a fresh owner");
    }
    assert!(
        handed.token().unwrap() > first_token,
        "the new holder's token is larger"
    );
    handed.unlock().await.unwrap();
    for server in &instances.servers {
        assert!(
            !held_on(server, &name),
            "the last unlock frees every instance"
        );
    }
}

/// A hand-off that reaches fewer than a quorum of instances (the holder's holds gone from two
/// of three, unknown to it) is not the waiter's: what passed is released, and the waiter, woken,
/// takes the lock with a round of its own. Nothing is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redlock_hand_off_short_of_a_quorum_is_released_and_the_waiter_takes_the_lock_itself() {
    let instances = Instances::spawn(3);
    let clients = instances.clients(Duration::from_secs(30)).await;
    let name = unique_name("redlock-handoff-short");
    let guard = red_lock(&clients, &name, false).lock().await.unwrap();
    let waiter = red_lock(&clients, &name, false);
    let waiting = tokio::spawn(async move {
        let guard = waiter.lock().await.unwrap();
        let holds = guard.holds().len();
        guard.unlock().await.unwrap();
        holds
    });
    eventually(Duration::from_secs(10), "the waiter watching", || async {
        instances.servers.iter().any(|s| watched(s, &name))
    })
    .await;
    for server in &instances.servers[1..] {
        let _: () = redis::cmd("DEL")
            .arg(&name)
            .query(&mut server.connection())
            .unwrap();
    }
    // The unlock's own outcome is the guard's (it had lost its quorum): not what this is about.
    let _ = guard.unlock().await;
    let holds = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the waiter gets the lock")
        .unwrap();
    assert!(holds >= 2, "a quorum of holds: {holds}");
    released_everywhere(&instances, &name).await;
}

/// A waiter that gave up is not handed the lock: the unlock frees it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redlock_unlock_frees_the_lock_when_its_waiter_gave_up() {
    let instances = Instances::spawn(3);
    let clients = instances.clients(Duration::from_secs(30)).await;
    let name = unique_name("redlock-handoff-gone");
    let guard = red_lock(&clients, &name, false).lock().await.unwrap();
    let waiter = red_lock(&clients, &name, false);
    let waiting = tokio::spawn(async move { waiter.lock().await.map(|g| g.holds().len()) });
    // Refused, it watches an instance for the release (and has queued for a hand-off first).
    eventually(Duration::from_secs(10), "the waiter watching", || async {
        instances.servers.iter().any(|s| watched(s, &name))
    })
    .await;
    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());
    guard.unlock().await.unwrap();
    released_everywhere(&instances, &name).await;
}

/// A RedLock whose guard held its quorum unlocks with `Ok`: without waiting for an instance
/// that is frozen (its release goes on in the background), and when an instance no longer has
/// the hold (its lease ran out there while it was down). Fewer than a quorum releasing is an
/// error naming each instance that did not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redlock_unlock_succeeds_on_a_quorum_and_never_waits_for_an_instance_that_is_down() {
    let instances = Instances::spawn(3);
    let patience = Duration::from_secs(2);
    let mut clients = Vec::new();
    for server in &instances.servers {
        clients.push(instance_client(server.url(), Duration::from_secs(30), patience).await);
    }
    let name = unique_name("redlock-unlock");
    let lock = red_lock(&clients, &name, false);

    // One instance frozen: the unlock answers once the others released.
    let guard = lock.lock().await.unwrap();
    instances.servers[2].pause();
    let started = tokio::time::Instant::now();
    guard.unlock().await.unwrap();
    let took = started.elapsed();
    assert!(
        took < patience / 2,
        "the unlock waited {took:?} for a frozen instance (response timeout {patience:?})"
    );
    assert!(!held_on(&instances.servers[0], &name) && !held_on(&instances.servers[1], &name));
    instances.servers[2].resume();
    eventually(
        Duration::from_secs(10),
        "the frozen instance's release lands once it is back",
        || async { !held_on(&instances.servers[2], &name) },
    )
    .await;

    // An instance whose hold ran out while it was down (gone there, not yet known here): it
    // answers "not held", and the guard, which held its quorum, unlocks with Ok.
    let guard = lock.lock().await.unwrap();
    let _: () = redis::cmd("DEL")
        .arg(&name)
        .query(&mut instances.servers[1].connection())
        .unwrap();
    assert!(guard.ensure_held().is_ok());
    guard.unlock().await.unwrap();
    released_everywhere(&instances, &name).await;

    // Two of three frozen: short of a quorum, an error that names them.
    let guard = lock.lock().await.unwrap();
    instances.servers[1].pause();
    instances.servers[2].pause();
    let err = guard.unlock().await.unwrap_err();
    instances.servers[1].resume();
    instances.servers[2].resume();
    let text = err.to_string();
    assert!(matches!(err, Error::Unfinished(_)), "{err:?}");
    assert!(text.contains("released on 1 of 3"), "{text}");
    assert_eq!(
        text.matches(&format!("`{name}`")).count(),
        2,
        "each instance that did not release is named: {text}"
    );
    eventually(
        Duration::from_secs(10),
        "the background releases land once the instances are back",
        || async { instances.servers.iter().all(|s| !held_on(s, &name)) },
    )
    .await;
}

/// `try_lock_with` without a wait limit makes one round, as every lock's `try_lock_with` does
/// (it used to wait as long as it took), for both a MultiLock and a RedLock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_lock_with_no_wait_limit_makes_one_round() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    let name = unique_name("multi-try-once");
    let held = ReentrantLock::new(&a, &name).unwrap().lock().await.unwrap();
    let lock = || -> Box<dyn AnyLock> { Box::new(ReentrantLock::new(&a, &name).unwrap()) };
    let multi = MultiLock::new(vec![lock()]).unwrap();
    let red = RedLock::new(vec![lock()]).unwrap();
    let soon = Duration::from_secs(5);
    let tried = tokio::time::timeout(soon, multi.try_lock_with(AcquireOptions::new()))
        .await
        .expect("a MultiLock's try_lock_with waited");
    assert!(tried.unwrap().is_none());
    let tried = tokio::time::timeout(soon, red.try_lock_with(AcquireOptions::new()))
        .await
        .expect("a RedLock's try_lock_with waited");
    assert!(tried.unwrap().is_none());
    held.unlock().await.unwrap();
    let guard = multi.try_lock_with(AcquireOptions::new()).await.unwrap();
    guard.expect("free now").unlock().await.unwrap();
}

fn pttl_on(server: &RedisServer, name: &str) -> i64 {
    redis::cmd("PTTL")
        .arg(name)
        .query(&mut server.connection())
        .unwrap()
}

fn delete_on(server: &RedisServer, name: &str) {
    let _: () = redis::cmd("DEL")
        .arg(name)
        .query(&mut server.connection())
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redlock_extends_its_fixed_lease_on_a_quorum_and_its_validity_follows() {
    let instances = Instances::spawn(3);
    let clients = instances.clients(Duration::from_millis(900)).await;
    let name = unique_name("redlock-extend");
    let lock = red_lock(&clients, &name, false);

    let guard = lock
        .lock_with(AcquireOptions::new().with_lease(Duration::from_secs(1)))
        .await
        .unwrap();
    let before = guard.valid_until().unwrap();
    guard.extend(Duration::from_secs(20)).await.unwrap();
    let after = guard.valid_until().unwrap();
    assert!(
        after > before + Duration::from_secs(15),
        "the validity moved"
    );
    for server in &instances.servers {
        assert!(pttl_on(server, &name) > 15_000, "every instance extended");
    }
    // The loss signal follows: the old validity passes without a loss.
    assert!(
        tokio::time::timeout(Duration::from_millis(1500), guard.lost())
            .await
            .is_err(),
        "no loss at the old validity"
    );
    guard.ensure_held().unwrap();
    // Shorter: the guard is lost at the new, earlier validity, and a loss future made before
    // the extension (asleep on the later validity, 20 s off) wakes to it.
    let watching = guard.lost_owned();
    guard.extend(Duration::from_millis(300)).await.unwrap();
    let reason = tokio::time::timeout(Duration::from_secs(5), watching)
        .await
        .expect("lost at the shortened validity");
    assert_eq!(reason, ferrisson::LossReason::LeaseExpired);
    let late = guard.extend(Duration::from_secs(1)).await;
    assert!(matches!(late, Err(Error::LeaseLost(_))), "{late:?}");
    drop(guard);
    released_everywhere(&instances, &name).await;

    // One instance's hold gone: the quorum extends. Two gone: lost.
    let guard = lock
        .lock_with(AcquireOptions::new().with_lease(Duration::from_secs(20)))
        .await
        .unwrap();
    delete_on(&instances.servers[0], &name);
    guard.extend(Duration::from_secs(30)).await.unwrap();
    assert!(pttl_on(&instances.servers[1], &name) > 25_000);
    delete_on(&instances.servers[1], &name);
    let short = guard.extend(Duration::from_secs(30)).await;
    assert!(matches!(short, Err(Error::LeaseLost(_))), "{short:?}");
    assert!(guard.loss_reason().is_some());
    drop(guard);
    released_everywhere(&instances, &name).await;

    // Holds the watchdogs keep are not extended.
    let kept = lock.lock().await.unwrap();
    let refused = kept.extend(Duration::from_secs(5)).await;
    assert!(
        matches!(refused, Err(Error::InvalidArgument(_))),
        "{refused:?}"
    );
    kept.unlock().await.unwrap();

    // A MultiLock extends every lock, and not with one of them gone.
    let c = &clients[0];
    let (a, b) = (unique_name("multi-extend"), unique_name("multi-extend"));
    let multi = MultiLock::new(vec![
        Box::new(ReentrantLock::new(c, &a).unwrap()),
        Box::new(ReentrantLock::new(c, &b).unwrap()),
    ])
    .unwrap();
    let guard = multi
        .lock_with(AcquireOptions::new().with_lease(Duration::from_secs(5)))
        .await
        .unwrap();
    guard.extend(Duration::from_secs(40)).await.unwrap();
    assert!(pttl_on(&instances.servers[0], &a) > 35_000);
    assert!(pttl_on(&instances.servers[0], &b) > 35_000);
    delete_on(&instances.servers[0], &b);
    let partial = guard.extend(Duration::from_secs(40)).await;
    assert!(matches!(partial, Err(Error::LeaseLost(_))), "{partial:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scoped_work_under_a_redlock_runs_while_held_and_is_cut_off_by_a_loss() {
    let instances = Instances::spawn(3);
    let clients = instances.clients(Duration::from_millis(900)).await;
    let name = unique_name("redlock-with");
    let lock = red_lock(&clients, &name, false);

    let held = lock
        .with(|_| async { instances.servers.iter().all(|s| held_on(s, &name)) })
        .await
        .unwrap();
    assert!(held, "the work ran while every instance held the lock");
    released_everywhere(&instances, &name).await;

    // A quorum's holds deleted under the work: the watchdogs see it and the work is cut off.
    let cut = lock
        .with(|_| async {
            delete_on(&instances.servers[0], &name);
            delete_on(&instances.servers[1], &name);
            std::future::pending::<()>().await
        })
        .await;
    assert!(matches!(cut, Err(Error::LeaseLost(_))), "{cut:?}");
    released_everywhere(&instances, &name).await;

    // Held elsewhere: a bounded wait times out and the work never runs.
    let rival = red_lock(
        &instances.clients(Duration::from_secs(30)).await,
        &name,
        false,
    );
    let outsider = rival.lock().await.unwrap();
    let ran = AtomicUsize::new(0);
    let timed_out = lock
        .with_options(
            AcquireOptions::new().with_wait(Duration::from_millis(200)),
            |_| async { ran.fetch_add(1, Ordering::SeqCst) },
        )
        .await;
    assert!(matches!(timed_out, Err(Error::Timeout(_))), "{timed_out:?}");
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    outsider.unlock().await.unwrap();
}
