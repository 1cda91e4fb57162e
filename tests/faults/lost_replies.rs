//! Lost replies: through a proxy that loses a quarter of the server's replies (the command ran,
//! the client's connection is cut before it hears so), acquire/release cycles of every kind
//! must end with every permit back and no lock held. A lost reply is an unknown outcome,
//! resolved before the call returns, never a hold kept with no guard to release it.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common;

use ferrisson::Lock;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use common::{RedisServer, eventually, join_within, unique_name};
use ferrisson::{Client, ClientConfig, RetryPolicy};
use ferrisson_testkit::FaultProxy;

/// The share of replies the proxy loses.
const LOSS: f64 = 0.25;

/// A client through `proxy`, with short back-offs so that a thousand lost replies pass
/// quickly, and a short response timeout. Its lease is ten minutes: a hold leaked with no
/// guard to release it would stall the cycles past their time limit instead of ending by
/// itself.
pub(crate) async fn lossy_client(proxy: &FaultProxy) -> Client {
    let config = ClientConfig::new(proxy.url())
        .with_lease(Duration::from_secs(600))
        .with_response_timeout(Duration::from_secs(1))
        .with_connect_timeout(Duration::from_secs(1))
        .with_retry(RetryPolicy {
            retries: 3,
            backoff: ferrisson::Backoff {
                min: Duration::from_millis(2),
                max: Duration::from_millis(50),
            },
        })
        .with_wait_outage_limit(Duration::from_secs(60));
    // Connecting itself can lose its replies: try until one connection is made.
    for _ in 0..50 {
        if let Ok(client) = Client::with_config(config.clone()).await {
            return client;
        }
    }
    panic!("could not connect through the proxy in 50 tries")
}

/// Runs `cycles` cycles split across `workers` tasks; each cycle's calls may fail (an outcome
/// unknown for longer than the settle window is reported as an error), but nothing may leak.
/// Returns how many cycles completed without an error.
async fn run_cycles<F, Fut>(cycles: u32, workers: u32, cycle: F) -> u64
where
    F: Fn(u32) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<(), ferrisson::Error>> + Send,
{
    let cycle = Arc::new(cycle);
    let next = Arc::new(AtomicU32::new(0));
    let ok = Arc::new(AtomicU64::new(0));
    let tasks = (0..workers)
        .map(|_| {
            let (cycle, next, ok) = (cycle.clone(), next.clone(), ok.clone());
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= cycles {
                        break;
                    }
                    if cycle(i).await.is_ok() {
                        ok.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    join_within(Duration::from_secs(240), "every cycle ends", tasks).await;
    ok.load(Ordering::Relaxed)
}

/// Runs `cycles` cycles through `proxy` losing [`LOSS`] of the replies, then stops the loss
/// and checks that replies were lost and most cycles succeeded.
async fn lossy_run<F, Fut>(proxy: &FaultProxy, cycles: u32, workers: u32, cycle: F)
where
    F: Fn(u32) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<(), ferrisson::Error>> + Send,
{
    proxy.lose_replies(LOSS);
    let ok = run_cycles(cycles, workers, cycle).await;
    proxy.lose_replies(0.0);
    let lost = proxy.replies_lost();
    assert!(
        lost > u64::from(cycles / 10),
        "the proxy lost only {lost} replies"
    );
    assert!(
        ok > u64::from(cycles / 2),
        "only {ok} of {cycles} cycles succeeded"
    );
}

/// Counts a task into a section that at most `most` may be in at once.
async fn in_section(inside: &AtomicU32, most: u32) {
    assert!(
        inside.fetch_add(1, Ordering::SeqCst) < most,
        "over {most} inside"
    );
    tokio::task::yield_now().await;
    inside.fetch_sub(1, Ordering::SeqCst);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_cycles_through_lost_replies_leave_every_permit() {
    let server = RedisServer::spawn();
    let proxy = FaultProxy::start(server.port());
    let direct = common::client(&server.url()).await;
    let name = unique_name("lost-sem");
    ferrisson_semaphore::Semaphore::new(&direct, &name)
        .unwrap()
        .try_set_permits(3)
        .await
        .unwrap();
    let client = lossy_client(&proxy).await;
    let semaphore = ferrisson_semaphore::Semaphore::new(&client, &name).unwrap();
    let in_flight = Arc::new(AtomicU32::new(0));
    lossy_run(&proxy, 1000, 6, move |_| {
        let (semaphore, in_flight) = (semaphore.clone(), in_flight.clone());
        async move {
            let permits = semaphore.acquire().await?;
            in_section(&in_flight, 3).await;
            permits.release().await
        }
    })
    .await;
    let semaphore = ferrisson_semaphore::Semaphore::new(&direct, &name).unwrap();
    eventually(Duration::from_secs(30), "every permit back", || async {
        semaphore.available_permits().await.unwrap() == 3
    })
    .await;
}

/// Lock cycles of the lock `make` makes, through lost replies: holds never overlap, and none
/// is left once the loss stops.
async fn lock_cycles<L, F>(prefix: &str, make: F)
where
    L: Lock + Clone + Send + Sync + 'static,
    F: Fn(&Client, &str) -> L,
{
    let server = RedisServer::spawn();
    let proxy = FaultProxy::start(server.port());
    let direct = common::client(&server.url()).await;
    let name = unique_name(prefix);
    let client = lossy_client(&proxy).await;
    let lock = make(&client, &name);
    let holders = Arc::new(AtomicU32::new(0));
    lossy_run(&proxy, 1000, 4, move |_| {
        let (lock, holders) = (lock.clone(), holders.clone());
        async move {
            // An acquisition under a fresh owner is never a re-entry, whatever replies are
            // lost: a resend must find the hold its lost call took, not refuse it.
            let guard = match lock.lock().await {
                Err(ferrisson::Error::WouldDeadlock(m)) => {
                    panic!("an acquire through lost replies was refused as a re-entry: {m}")
                }
                other => other?,
            };
            in_section(&holders, 1).await;
            guard.unlock().await
        }
    })
    .await;
    let lock = make(&direct, &name);
    eventually(Duration::from_secs(30), "the lock free", || async {
        !lock.is_locked().await.unwrap()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_cycles_through_lost_replies_leave_it_free_and_never_overlap() {
    lock_cycles("lost-lock", |client, name| {
        ferrisson::ReentrantLock::new(client, name).unwrap()
    })
    .await;
}

/// The non-reentrant lock's acquire, resent after a lost reply, finds the hold its lost call
/// took (the owner's count is one more than it believes) instead of refusing it as a re-entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_reentrant_lock_cycles_through_lost_replies_leave_it_free_and_never_overlap() {
    lock_cycles("lost-non-reentrant", |client, name| {
        ferrisson::NonReentrantLock::new(client, name).unwrap()
    })
    .await;
}

/// As for the non-reentrant lock, through the fair lock's queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_reentrant_fair_lock_cycles_through_lost_replies_leave_it_free_and_never_overlap() {
    lock_cycles("lost-non-reentrant-fair", |client, name| {
        ferrisson::NonReentrantFairLock::new(client, name).unwrap()
    })
    .await;
}

/// The lean mutex keeps no record of its releases: a resent release that finds the key gone
/// may report `NotOwner` (counted as a failed cycle), but holds never overlap and none is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutex_cycles_through_lost_replies_leave_it_free_and_never_overlap() {
    lock_cycles("lost-mutex", |client, name| {
        ferrisson::Mutex::new(client, name).unwrap()
    })
    .await;
}

/// Whatever replies are lost, an unlock of a hold whose lease is standing reports success,
/// never `NotOwner` (a retry reads the lost call's result from its latch, or, for a release
/// that freed the lock and recorded nothing, learns it from the standing lease), and leaves the
/// lock free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlocks_through_lost_replies_report_success_and_free_the_lock() {
    let server = RedisServer::spawn();
    let proxy = FaultProxy::start(server.port());
    let direct = common::client(&server.url()).await;
    let client = lossy_client(&proxy).await;
    let names: Arc<Vec<String>> = Arc::new(
        (0..4)
            .map(|i| unique_name(&format!("lost-last-{i}")))
            .collect(),
    );
    let not_owner = Arc::new(AtomicU32::new(0));
    let (cycle_names, cycle_not_owner) = (names.clone(), not_owner.clone());
    lossy_run(&proxy, 400, 4, move |i| {
        let lock = ferrisson::ReentrantLock::new(&client, &cycle_names[(i % 4) as usize]);
        let not_owner = cycle_not_owner.clone();
        async move {
            let guard = lock?.try_lock().await?;
            // Another worker's cycle on the same name may hold it: then there is nothing to do.
            let Some(guard) = guard else { return Ok(()) };
            let unlocked = guard.unlock().await;
            if let Err(ferrisson::Error::NotOwner(_)) = &unlocked {
                not_owner.fetch_add(1, Ordering::SeqCst);
            }
            unlocked
        }
    })
    .await;
    assert_eq!(
        not_owner.load(Ordering::SeqCst),
        0,
        "unlocks reported NotOwner for holds that were standing"
    );
    for name in names.iter() {
        let lock = ferrisson::ReentrantLock::new(&direct, name).unwrap();
        eventually(Duration::from_secs(30), "the lock free", || async {
            !lock.is_locked().await.unwrap()
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_kinds_through_lost_replies_leak_nothing() {
    let server = RedisServer::spawn();
    let proxy = FaultProxy::start(server.port());
    let direct = common::client(&server.url()).await;
    let client = lossy_client(&proxy).await;
    let (fair, rw, exp) = (
        unique_name("lost-fair"),
        unique_name("lost-rw"),
        unique_name("lost-exp"),
    );
    ferrisson_expirable_semaphore::ExpirableSemaphore::new(&direct, &exp)
        .unwrap()
        .try_set_permits(2)
        .await
        .unwrap();
    let fair_lock = ferrisson_fair_lock::FairLock::new(&client, &fair).unwrap();
    let rwlock = ferrisson_rwlock::ReadWriteLock::new(&client, &rw).unwrap();
    let expirable = ferrisson_expirable_semaphore::ExpirableSemaphore::new(&client, &exp).unwrap();
    lossy_run(&proxy, 300, 4, move |i| {
        let (fair_lock, rwlock, expirable) = (fair_lock.clone(), rwlock.clone(), expirable.clone());
        async move {
            match i % 4 {
                0 => fair_lock.lock().await?.unlock().await,
                1 => rwlock.write_lock().lock().await?.unlock().await,
                2 => rwlock.read_lock().lock().await?.unlock().await,
                _ => expirable.acquire().await?.release().await,
            }
        }
    })
    .await;
    let fair_lock = ferrisson_fair_lock::FairLock::new(&direct, &fair).unwrap();
    let rwlock = ferrisson_rwlock::ReadWriteLock::new(&direct, &rw).unwrap();
    let expirable = ferrisson_expirable_semaphore::ExpirableSemaphore::new(&direct, &exp).unwrap();
    eventually(
        Duration::from_secs(30),
        "every lock free, every permit back",
        || async {
            !fair_lock.is_locked().await.unwrap()
                && !rwlock.is_locked().await.unwrap()
                && expirable.available_permits().await.unwrap() == 2
        },
    )
    .await;
}

/// Count-downs through lost replies: every call is resolved under its request id, so plain
/// count-downs count exactly once each (the latch opens at the last one, never before), and a
/// participant whose reply was lost is told it counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latch_count_downs_through_lost_replies_count_exactly_once() {
    let server = RedisServer::spawn();
    let proxy = FaultProxy::start(server.port());
    let client = lossy_client(&proxy).await;
    let direct = common::client(&server.url()).await;
    const N: u32 = 200;
    let name = unique_name("lossy-latch");
    let check = ferrisson_latch::CountDownLatch::new(&direct, &name).unwrap();
    assert!(check.try_set_count(N).await.unwrap());
    proxy.lose_replies(LOSS);
    let latch = ferrisson_latch::CountDownLatch::new(&client, &name).unwrap();
    for i in 0..N - 1 {
        // An error is an outcome still unknown after the settle window: not expected at this
        // loss rate with retries, and then the count below tells whether it counted.
        latch.count_down().await.unwrap();
        assert_eq!(
            check.count().await.unwrap(),
            u64::from(N - 1 - i),
            "after {} count-downs",
            i + 1
        );
    }
    latch.count_down().await.unwrap();
    assert_eq!(check.count().await.unwrap(), 0);

    let name = unique_name("lossy-participants");
    let check = ferrisson_latch::CountDownLatch::new(&direct, &name).unwrap();
    assert!(check.try_set_count(N).await.unwrap());
    let latch = ferrisson_latch::CountDownLatch::new(&client, &name).unwrap();
    for i in 0..N {
        let participant = format!("p{i}");
        assert!(
            latch.count_down_once(&participant).await.unwrap().counted(),
            "{participant} counted"
        );
        // Counted already (or, for the last, the latch it opened is not armed any more).
        assert!(
            !latch.count_down_once(&participant).await.unwrap().counted(),
            "{participant} once"
        );
    }
    assert_eq!(check.count().await.unwrap(), 0);
    assert!(
        proxy.replies_lost() > 20,
        "the proxy lost {} replies",
        proxy.replies_lost()
    );
}

/// A client through `proxy` whose retries after a lost reply wait `pause`: long enough for a
/// call made right after the loss to overtake them.
pub(crate) async fn slow_retry_client(proxy: &FaultProxy, pause: Duration) -> Client {
    let config = ClientConfig::new(proxy.url())
        .with_lease(Duration::from_secs(600))
        .with_response_timeout(Duration::from_secs(2))
        .with_retry(RetryPolicy {
            retries: 3,
            backoff: ferrisson::Backoff {
                min: pause,
                max: pause,
            },
        });
    Client::with_config(config).await.unwrap()
}

/// A server, a proxy in front of it, a client straight to the server and one through the proxy
/// whose retries wait 300 ms ([`slow_retry_client`]).
async fn slow_retry_setup() -> (RedisServer, FaultProxy, Client, Client) {
    let server = RedisServer::spawn();
    let proxy = FaultProxy::start(server.port());
    let direct = common::client(&server.url()).await;
    let client = slow_retry_client(&proxy, Duration::from_millis(300)).await;
    (server, proxy, direct, client)
}

/// Sends a release of `guard`, lets it run in Redis with its reply held back, then cuts the
/// connection: the reply is lost, and the release will be resent.
async fn release_with_lost_reply(
    proxy: &FaultProxy,
    direct: &ferrisson::ReentrantLock,
    release: impl std::future::Future<Output = ()> + Send + 'static,
) -> tokio::task::JoinHandle<()> {
    proxy.delay_replies(Duration::from_secs(5));
    let released = tokio::spawn(release);
    eventually(
        Duration::from_secs(10),
        "the release run in Redis",
        || async { !direct.is_locked().await.unwrap() },
    )
    .await;
    let accepted = proxy.connections_accepted();
    proxy.cut_connections();
    proxy.delay_replies(Duration::ZERO);
    // The client reconnects by itself: once it has, a call goes through at once while the
    // release waits out its pause before the resend.
    eventually(
        Duration::from_secs(10),
        "the client reconnected",
        || async { proxy.connections_accepted() > accepted },
    )
    .await;
    released
}

/// A bound owner that takes the lock again while its release's reply is lost keeps the new
/// hold: a resend that found the owner holding and took it for its own would free the new hold.
/// Two things stop it, each enough here: the owner's acquire waits until its release has
/// settled, and the resend finds its sequence number in the client's latch (it freed the lock
/// already). Fails with both removed (checked): the resend comes after the acquire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_owner_acquiring_while_its_release_is_resent_keeps_the_new_hold() {
    let (_server, proxy, direct, client) = slow_retry_setup().await;
    let name = unique_name("bound-reacquire");
    let owner = client.new_owner();
    let lock = ferrisson::ReentrantLock::new(&client, &name)
        .unwrap()
        .owned_by(owner.clone());
    let watcher = ferrisson::ReentrantLock::new(&direct, &name).unwrap();
    // Warm up: the scripts are loaded before replies are held back.
    lock.lock().await.unwrap().unlock().await.unwrap();
    let guard = lock.lock().await.unwrap();
    // Dropped: released in the background, its outcome unknown once the reply is lost.
    let released = release_with_lost_reply(&proxy, &watcher, async move { drop(guard) }).await;
    released.await.unwrap();
    let again = lock.lock().await.unwrap();
    // The resend (if it were to come after this hold) is due within its 300 ms pause: the new
    // hold must stand well past it.
    let until = tokio::time::Instant::now()
        .checked_add(Duration::from_secs(2))
        .expect("a deadline two seconds out");
    while tokio::time::Instant::now() < until {
        assert_eq!(
            watcher.hold_count_of(&owner).await.unwrap(),
            1,
            "the new hold was freed under its guard"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!again.is_lost(), "the guard was told it lost the lock");
    again.unlock().await.unwrap();
    assert!(!watcher.is_locked().await.unwrap());
}

/// An unlock whose reply is lost after it freed the lock reports success, whether or not the
/// hold's lease has run out by the time the resend is answered, and whether or not another
/// hold of the same client freed the lock again before the resend: the free recorded itself in
/// the client's latch, and a free made while that release could still be resent records itself
/// in its own latch instead of overwriting that record (without that, the resend would find
/// the hold gone and nothing of its own, and could not vouch that it freed the lock).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlock_whose_reply_is_lost_reports_what_it_did() {
    let (_server, proxy, direct, client) = slow_retry_setup().await;
    // Warm up: the scripts are loaded before replies are held back.
    let warm = ferrisson::ReentrantLock::new(&client, &unique_name("warm")).unwrap();
    warm.lock().await.unwrap().unlock().await.unwrap();
    let long = Duration::from_secs(60);
    let short = Duration::from_millis(150);
    for (lease, overtaken) in [(long, false), (short, false), (long, true), (short, true)] {
        let name = unique_name("lost-unlock");
        let lock = ferrisson::ReentrantLock::new(&client, &name).unwrap();
        let watcher = ferrisson::ReentrantLock::new(&direct, &name).unwrap();
        let guard = lock
            .lock_with(ferrisson::AcquireOptions::new().with_lease(lease))
            .await
            .unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let released = release_with_lost_reply(&proxy, &watcher, async move {
            let _ = tx.send(guard.unlock().await);
        })
        .await;
        if overtaken {
            // Within the resend's 300 ms pause: another hold of this client frees the lock.
            lock.lock().await.unwrap().unlock().await.unwrap();
        }
        released.await.unwrap();
        let unlocked = rx.await.unwrap();
        assert!(
            unlocked.is_ok(),
            "lease {lease:?}, overtaken {overtaken}: {unlocked:?}"
        );
        assert!(!watcher.is_locked().await.unwrap());
    }
}

/// An unlock in flight while Redis restarts without persistence (the hold is lost with it)
/// reports `NotOwner`, never success, even when another task of the same client takes the lock
/// on the new server and frees it before the unlock is resent: the resend finds neither the
/// hold nor a record of its own (the other free latched itself apart), and runs as a first
/// call would. A release without any latch reported success here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlock_lost_in_a_restart_never_reports_success() {
    let mut server = RedisServer::spawn();
    let proxy = FaultProxy::start(server.port());
    let client = slow_retry_client(&proxy, Duration::from_millis(300)).await;
    let name = unique_name("restart-unlock");
    let lock = ferrisson::ReentrantLock::new(&client, &name).unwrap();
    // Warm up: the scripts are loaded (the new server will answer NOSCRIPT, then EVAL).
    lock.lock().await.unwrap().unlock().await.unwrap();
    let guard = lock.lock().await.unwrap();
    // Frozen, the server takes the unlock into its socket and never runs it.
    server.pause();
    let unlocked = tokio::spawn(async move { guard.unlock().await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let accepted = proxy.connections_accepted();
    server.restart();
    // The client reconnects; the unlock waits out its 300 ms pause before the resend.
    eventually(
        Duration::from_secs(10),
        "the client reconnected",
        || async { proxy.connections_accepted() > accepted },
    )
    .await;
    let taken = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match lock.try_lock().await {
                Ok(Some(other)) => return other.unlock().await,
                Ok(None) => tokio::task::yield_now().await,
                Err(e) if e.is_connection_error() => tokio::task::yield_now().await,
                Err(e) => return Err(e),
            }
        }
    })
    .await
    .expect("another task takes the lock on the new server");
    taken.unwrap();
    let unlocked = unlocked.await.unwrap();
    assert!(
        matches!(unlocked, Err(ferrisson::Error::NotOwner(_))),
        "an unlock whose hold was lost in a restart said {unlocked:?}"
    );
}

/// A rate limiter's acquire whose reply was lost is resent and counts once: the server's count
/// of permits taken, its window's entries and what the callers were told agree (a resend that
/// subtracted again would leak capacity for good), and a resend never answers "not taken" for
/// permits its lost run took.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limiters_acquire_through_lost_replies_counts_once() {
    use ferrisson_rate_limiter::{RateLimiter, RateType};
    use redis::Commands;
    let server = RedisServer::spawn();
    let proxy = FaultProxy::start(server.port());
    let direct = Client::connect(&server.url()).await.unwrap();
    let lossy = lossy_client(&proxy).await;
    let name = unique_name("lossy-rate");
    let rate = 1_000u64;
    let window = Duration::from_secs(3600);
    assert!(
        RateLimiter::new(&direct, &name)
            .unwrap()
            .try_set_rate(RateType::Overall, rate, window)
            .await
            .unwrap()
    );
    // Single-permit limiters, each asked once: a resend that found its window full would say
    // "not taken" for the permit its lost run took.
    let singles: Vec<String> = (0..100).map(|i| format!("{name}:one:{i}")).collect();
    for single in &singles {
        assert!(
            RateLimiter::new(&direct, single)
                .unwrap()
                .try_set_rate(RateType::Overall, 1, window)
                .await
                .unwrap()
        );
    }
    proxy.lose_replies(LOSS);
    let limiter = RateLimiter::new(&lossy, &name).unwrap();
    let (mut told, mut unknown) = (0u64, 0u64);
    for _ in 0..300 {
        match limiter.try_acquire(1).await {
            Ok(true) => told += 1,
            Ok(false) => panic!("a window with room answered \"not taken\""),
            Err(e) if e.is_connection_error() => unknown += 1,
            Err(e) => panic!("{e}"),
        }
    }
    let mut single_told = Vec::new();
    for single in &singles {
        let limiter = RateLimiter::new(&lossy, single).unwrap();
        match limiter.try_acquire(1).await {
            Ok(taken) => single_told.push((single.clone(), taken)),
            Err(e) if e.is_connection_error() => {}
            Err(e) => panic!("{e}"),
        }
    }
    proxy.lose_replies(0.0);
    assert!(proxy.replies_lost() >= 30, "the proxy lost replies");
    let mut con = server.connection();
    let left: u64 = con.get(format!("{{{name}}}:value")).unwrap();
    let entries: u64 = con.zcard(format!("{{{name}}}:permits")).unwrap();
    assert_eq!(
        rate - left,
        entries,
        "the count of permits taken and the window's entries agree"
    );
    assert!(
        entries >= told && entries <= told + unknown,
        "{entries} permits taken, {told} callers told so, {unknown} outcomes unknown"
    );
    for (single, taken) in single_told {
        assert!(
            taken,
            "`{single}`: a first acquire on an empty window was told \"not taken\""
        );
        let entries: u64 = con.zcard(format!("{{{single}}}:permits")).unwrap();
        assert_eq!(entries, 1, "`{single}`: taken once");
    }
}

/// A rate limiter's release whose reply was lost is resent and gives its permits back once:
/// after 200 single releases of 500 permits taken, the window holds exactly 300 and 700 are
/// left, however many replies were lost (a resend that released again would leave fewer in the
/// window and more left).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limiters_release_through_lost_replies_counts_once() {
    use ferrisson_rate_limiter::{RateLimiter, RateType};
    let server = RedisServer::spawn();
    let proxy = FaultProxy::start(server.port());
    let direct = Client::connect(&server.url()).await.unwrap();
    let lossy = lossy_client(&proxy).await;
    let name = unique_name("lossy-rate-release");
    let steady = RateLimiter::new(&direct, &name).unwrap();
    steady
        .set_rate(RateType::Overall, 1_000, Duration::from_secs(3600))
        .await
        .unwrap();
    for _ in 0..5 {
        assert!(steady.try_acquire(100).await.unwrap());
    }
    proxy.lose_replies(LOSS);
    let limiter = RateLimiter::new(&lossy, &name).unwrap();
    let mut unknown = 0;
    for _ in 0..200 {
        match limiter.release(1).await {
            Ok(()) => {}
            Err(e) if e.is_connection_error() => unknown += 1,
            Err(e) => panic!("{e}"),
        }
    }
    proxy.lose_replies(0.0);
    assert!(proxy.replies_lost() >= 20, "the proxy lost replies");
    // Releases whose outcome stayed unknown are resent in the background.
    eventually(
        Duration::from_secs(30),
        "every release settled at 700 left",
        || async { steady.available_permits().await.unwrap() == 700 },
    )
    .await;
    let mut con = server.connection();
    let members: Vec<Vec<u8>> =
        redis::Commands::zrange(&mut con, format!("{{{name}}}:permits"), 0, -1).unwrap();
    let in_window: u32 = members
        .iter()
        .map(|m| u32::from_le_bytes(m[m.len() - 4..].try_into().unwrap()))
        .sum();
    assert_eq!(in_window, 300, "{unknown} outcomes were unknown");
}
