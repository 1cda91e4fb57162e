//! The lean mutex: what is its own beside the generic lock suite (`conformance.rs`): no
//! re-entry, the standard Redlock layout shared with other clients, keys of other types, the
//! watchdog on its string.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common;

use std::time::Duration;

use common::{
    RedisServer, TestRedis, client, client_with_lease, delta, eventually, mutex_waiters_subscribed,
    parked_then_settled, settled_command_calls, unique_name,
};
use ferrisson::{AcquireOptions, Error, FencedMutex, Lock, LossReason, Mutex, SyncObject};
use redis::Commands;

const SOON: Duration = Duration::from_secs(10);

/// rslock's, redsync's and redis-py's release: delete if the value is the caller's token.
const PEER_RELEASE: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_holding_it_is_refused_instead_of_waiting_on_itself() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    let mutex = Mutex::new(&a, &unique_name("mutex-reentry")).unwrap();
    let bound = mutex.owned_by(a.new_owner());
    let guard = bound.lock().await.unwrap();
    for err in [
        bound.lock().await.unwrap_err(),
        bound.try_lock().await.unwrap_err(),
    ] {
        assert!(matches!(err, Error::WouldDeadlock(_)), "{err:?}");
    }
    assert_eq!(bound.hold_count().await.unwrap(), 1);
    assert!(
        guard.loss_reason().is_none(),
        "the refusal left the hold alone"
    );
    guard.unlock().await.unwrap();
    assert!(!mutex.is_locked().await.unwrap());
}

/// The key holds the holder's token with the lease as its TTL: another Redlock client's
/// `SET NX PX` fails while it is held, and this client waits for a peer's hold (whose release
/// publishes nothing) until the peer's lease ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn it_shares_the_standard_layout_with_other_redlock_clients() {
    let redis = TestRedis::any();
    // A short lease: the watchdog renews (and finds a hold gone) soon.
    let a = client_with_lease(&redis.url(), Duration::from_millis(900)).await;
    let name = unique_name("mutex-layout");
    let mutex = Mutex::new(&a, &name).unwrap();
    let mut con = redis.connection();

    let guard = mutex
        .lock_with(AcquireOptions::new().with_lease(Duration::from_secs(20)))
        .await
        .unwrap();
    let token: String = con.get(&name).unwrap();
    assert_eq!(token, guard.owner().as_str());
    let ttl: i64 = con.pttl(&name).unwrap();
    assert!(ttl > 0 && ttl <= 20_000, "{ttl}");
    let peer: Option<String> = redis::cmd("SET")
        .arg(&name)
        .arg("peer-token")
        .arg("NX")
        .arg("PX")
        .arg(5_000)
        .query(&mut con)
        .unwrap();
    assert_eq!(peer, None, "a peer took a held mutex");
    // A peer's release with another token leaves it alone; ours frees it.
    let deleted: i64 = redis::Script::new(PEER_RELEASE)
        .key(&name)
        .arg("peer-token")
        .invoke(&mut con)
        .unwrap();
    assert_eq!(deleted, 0);
    guard.unlock().await.unwrap();
    let exists: bool = con.exists(&name).unwrap();
    assert!(!exists, "the release left the key");

    // A peer's hold: refused at once, waited for until its lease ends.
    let _: () = redis::cmd("SET")
        .arg(&name)
        .arg("peer-token")
        .arg("PX")
        .arg(300)
        .query(&mut con)
        .unwrap();
    assert!(mutex.try_lock().await.unwrap().is_none());
    assert!(mutex.is_locked().await.unwrap());
    let ours = mutex
        .try_lock_with(AcquireOptions::new().with_wait(SOON))
        .await
        .unwrap()
        .expect("taken once the peer's lease ended");
    // And a peer's release with our token frees it for everyone (the layout is shared).
    let deleted: i64 = redis::Script::new(PEER_RELEASE)
        .key(&name)
        .arg(ours.owner().as_str())
        .invoke(&mut con)
        .unwrap();
    assert_eq!(deleted, 1);
    assert_eq!(
        tokio::time::timeout(SOON, ours.lost()).await.unwrap(),
        ferrisson::LossReason::NotHeld,
        "the holder is told at its next renewal"
    );
}

/// A string is a mutex held by some token (it may be another client's); any other type is
/// someone else's data: refused, and left as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hash_at_its_name_is_refused_and_a_string_is_a_foreign_hold() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    let mut con = redis.connection();

    let name = unique_name("mutex-hash");
    let _: () = con.hset(&name, "f", "x").unwrap();
    let mutex = Mutex::new(&a, &name).unwrap();
    let waiting = AcquireOptions::new().with_wait(Duration::from_millis(200));
    for err in [
        mutex.try_lock().await.unwrap_err(),
        mutex.try_lock_with(waiting).await.unwrap_err(),
        mutex.force_unlock().await.unwrap_err(),
        mutex.is_locked().await.unwrap_err(),
        mutex.delete().await.unwrap_err(),
        mutex.expire(Duration::from_secs(5)).await.unwrap_err(),
    ] {
        assert!(matches!(err, Error::WrongType { .. }), "{err:?}");
    }
    let hash: std::collections::HashMap<String, String> = con.hgetall(&name).unwrap();
    assert_eq!(hash.len(), 1, "the user's hash changed: {hash:?}");
    let ttl: i64 = con.pttl(&name).unwrap();
    assert_eq!(ttl, -1, "the user's hash got an expiry");

    let name = unique_name("mutex-string");
    let _: () = con.set(&name, "someone").unwrap();
    let mutex = Mutex::new(&a, &name).unwrap();
    assert!(mutex.try_lock().await.unwrap().is_none());
    assert!(mutex.is_locked().await.unwrap());
    assert!(mutex.force_unlock().await.unwrap());
    mutex
        .try_lock()
        .await
        .unwrap()
        .expect("free")
        .unlock()
        .await
        .unwrap();
}

/// Kept by the watchdog, the hold outlives many leases; released, the key is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_keeps_its_string_alive() {
    let redis = TestRedis::any();
    let lease = Duration::from_millis(600);
    let a = client_with_lease(&redis.url(), lease).await;
    let name = unique_name("mutex-watchdog");
    let mutex = Mutex::new(&a, &name).unwrap();
    let guard = mutex.lock().await.unwrap();
    let mut con = redis.connection();
    let started = tokio::time::Instant::now();
    eventually(SOON, "three leases passed with the hold standing", || {
        let exists: bool = con.exists(&name).unwrap();
        assert!(exists, "the hold ended while kept");
        std::future::ready(started.elapsed() > lease * 3)
    })
    .await;
    assert!(guard.loss_reason().is_none());
    guard.unlock().await.unwrap();
    assert!(!mutex.is_locked().await.unwrap());
}

/// The unfenced acquire is the standard layout's plain `SET NX PX` (with `GET`), no script: the
/// server runs one `SET` per acquisition and no `GET` besides the release script's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unfenced_acquire_is_one_plain_set() {
    let server = RedisServer::spawn();
    let a = client(&server.url()).await;
    let mutex = Mutex::new(&a, &unique_name("mutex-plain")).unwrap();
    // Loads the release script, so that the counted rounds need no EVAL.
    mutex.lock().await.unwrap().unlock().await.unwrap();
    let mut con = server.connection();
    let before = settled_command_calls(&mut con).await;
    for _ in 0..10 {
        let guard = mutex.lock().await.unwrap();
        assert!(mutex.try_lock().await.unwrap().is_none());
        guard.unlock().await.unwrap();
    }
    let after = settled_command_calls(&mut con).await;
    assert_eq!(delta(&before, &after, "set"), 20, "one SET per try");
    assert_eq!(
        delta(&before, &after, "evalsha"),
        10,
        "one script per release"
    );
    assert_eq!(
        delta(&before, &after, "get"),
        10,
        "the releases' reads only"
    );
    assert_eq!(delta(&before, &after, "eval"), 0);
    assert_eq!(
        delta(&before, &after, "publish"),
        0,
        "nobody waits: no message"
    );
}

/// On a server before 7.0 (forced here with `with_redis_6_compatibility`: the test servers
/// run 7.x), `SET … NX … GET` is a syntax error, so the unfenced first try is the acquire
/// script, which takes the same string: a client on the plain command excludes it and is
/// excluded by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn before_redis_7_an_unfenced_acquire_is_the_script() {
    let server = RedisServer::spawn();
    let plain = client(&server.url()).await;
    assert!(plain.has_redis_7_commands(), "the test server runs 7.x");
    let config = ferrisson::ClientConfig::new(server.url()).with_redis_6_compatibility(true);
    let older = ferrisson::Client::with_config(config).await.unwrap();
    assert!(!older.has_redis_7_commands());
    let name = unique_name("mutex-6-2");
    let (mutex, other) = (
        Mutex::new(&older, &name).unwrap(),
        Mutex::new(&plain, &name).unwrap(),
    );
    // Loads the scripts, so that the counted rounds need no EVAL.
    mutex.lock().await.unwrap().unlock().await.unwrap();
    let mut con = server.connection();
    let before = settled_command_calls(&mut con).await;
    for _ in 0..10 {
        let guard = mutex.lock().await.unwrap();
        assert!(mutex.try_lock().await.unwrap().is_none());
        assert!(
            other.try_lock().await.unwrap().is_none(),
            "one string, one holder"
        );
        guard.unlock().await.unwrap();
    }
    let after = settled_command_calls(&mut con).await;
    assert_eq!(
        delta(&before, &after, "evalsha"),
        30,
        "a script per try and per release"
    );
    assert_eq!(
        delta(&before, &after, "set"),
        20,
        "the acquire script's SET, and the plain client's tries"
    );
    let held = other.lock().await.unwrap();
    assert!(
        mutex.try_lock().await.unwrap().is_none(),
        "and the other way round"
    );
    held.unlock().await.unwrap();
    older.shutdown().await.unwrap();
}

/// A waiter of another client marks itself when its try fails (the marker is a key named as the
/// release channel), so that the release publishes and wakes it; once nobody waits, the mark
/// runs out and releases publish nothing again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_publishes_only_while_a_waiter_is_marked() {
    let server = RedisServer::spawn();
    let (a, b) = (client(&server.url()).await, client(&server.url()).await);
    let name = unique_name("mutex-marker");
    let marker = format!("ferrisson_mutex__channel:{{{name}}}");
    let (ours, theirs) = (
        Mutex::new(&a, &name).unwrap(),
        Mutex::new(&b, &name).unwrap(),
    );
    let mut con = server.connection();
    let guard = ours.lock().await.unwrap();
    let waiter = tokio::spawn(async move { theirs.lock().await.unwrap() });
    eventually(SOON, "the waiter marked itself", || {
        let marked: bool = con.exists(&marker).unwrap();
        std::future::ready(marked)
    })
    .await;
    let ttl: i64 = con.pttl(&marker).unwrap();
    assert!(ttl > 0 && ttl <= 1_000, "a short mark: {ttl}");
    // What the channel carries, read by a subscriber of its own.
    let mut listener = server.connection();
    let mut channel = listener.as_pubsub();
    channel.subscribe(&marker).unwrap();
    channel.set_read_timeout(Some(SOON)).unwrap();
    let before = settled_command_calls(&mut con).await;
    guard.unlock().await.unwrap();
    let taken = tokio::time::timeout(SOON, waiter).await.unwrap().unwrap();
    let after = settled_command_calls(&mut con).await;
    // The release woke the waiter (`0`), and the waiter, taking it, said so (`t`: the waiters
    // other clients let that release pass for need not try).
    assert_eq!(delta(&before, &after, "publish"), 2);
    let payloads: Vec<String> = (0..2)
        .map(|_| channel.get_message().unwrap().get_payload().unwrap())
        .collect();
    assert_eq!(payloads, ["0", "t"]);
    drop(channel);
    taken.unlock().await.unwrap();
    eventually(SOON, "the mark ran out", || {
        let marked: bool = con.exists(&marker).unwrap();
        std::future::ready(!marked)
    })
    .await;
    let before = settled_command_calls(&mut con).await;
    ours.lock().await.unwrap().unlock().await.unwrap();
    let after = settled_command_calls(&mut con).await;
    assert_eq!(delta(&before, &after, "publish"), 0);
    // A delete takes the mark with it.
    let _: () = redis::cmd("SET")
        .arg(&marker)
        .arg("1")
        .arg("PX")
        .arg(60_000)
        .query(&mut con)
        .unwrap();
    let _held = ours.lock().await.unwrap();
    assert!(ours.delete().await.unwrap());
    let marked: bool = con.exists(&marker).unwrap();
    assert!(!marked, "deleted with the mutex");
}

/// A fenced mutex's tokens grow with every acquisition, by any handle and client, also after
/// its counter is lost; an unfenced handle of the same name excludes it and hands out none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_tokens_only_grow() {
    let redis = TestRedis::any();
    let (a, b) = (client(&redis.url()).await, client(&redis.url()).await);
    let name = unique_name("mutex-fenced");
    // One handle as a fenced `Mutex` (tokens as `Option`s), the other a `FencedMutex` (plain).
    let (fa, fb) = (
        Mutex::fenced(&a, &name).unwrap(),
        FencedMutex::new(&b, &name).unwrap(),
    );
    let plain = Mutex::new(&b, &name).unwrap();
    let mut con = redis.connection();
    let mut last = 0;
    for round in 0..6 {
        let (token, guard) = if round % 2 == 0 {
            let guard = fa.lock().await.unwrap();
            (
                guard.token().expect("a fenced mutex hands out tokens"),
                guard,
            )
        } else {
            let guard = fb.lock().await.unwrap();
            (guard.token(), guard.into_inner())
        };
        assert!(token > last, "token {token} after {last}");
        last = token;
        let counter: u64 = con
            .get(format!("ferrisson_mutex_token:{{{name}}}"))
            .unwrap();
        assert_eq!(counter, token, "the counter holds the last token");
        assert!(plain.try_lock().await.unwrap().is_none());
        if round == 3 {
            // A restart without persistence: the counter is gone.
            let _: () = con
                .del(format!("ferrisson_mutex_token:{{{name}}}"))
                .unwrap();
        }
        guard.unlock().await.unwrap();
    }
    let unfenced = plain.lock().await.unwrap();
    assert_eq!(unfenced.token(), None);
    unfenced.unlock().await.unwrap();
    // Scoped, a `FencedMutex`'s work gets the token as a plain u64, and stamps for its writes.
    let (token, stamps) = fb
        .with(|hold| async move { (hold.token(), (hold.stamp(), hold.stamp())) })
        .await
        .unwrap();
    assert!(token > last);
    assert_eq!(stamps, ((token, 1), (token, 2)));
    assert!(
        fb.try_lock().await.unwrap().is_some(),
        "released after the work"
    );
}

/// A waiter of the holder's own client gets the mutex in the release call: the value becomes
/// its token, nothing is published, and a fenced hand-off issues a larger token.
///
/// The waiter also looks again on its own every 200 ms (for releases of other Redlock
/// clients, which publish nothing): a release that meets it in the middle of such a look
/// cannot hand it the mutex, and the look is a script call of its own. On a busy machine that
/// can happen between the waiter found parked and the release; such a round proves nothing
/// either way and is run again (a few times at most: a release that never hands over fails).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_waiter_is_handed_the_mutex_in_the_release_call() {
    let server = RedisServer::spawn();
    let a = client(&server.url()).await;
    let mut con = server.connection();
    for fenced in [false, true] {
        let name = unique_name("mutex-handoff");
        let mutex = if fenced {
            Mutex::fenced(&a, &name).unwrap()
        } else {
            Mutex::new(&a, &name).unwrap()
        };
        let mut rounds = 0;
        loop {
            rounds += 1;
            let holder = mutex.lock().await.unwrap();
            let waiter = tokio::spawn({
                let mutex = mutex.clone();
                async move { mutex.lock().await.unwrap() }
            });
            eventually(SOON, "the waiter subscribed", || {
                std::future::ready(mutex_waiters_subscribed(&mut con, &name) == 1)
            })
            .await;
            let before = parked_then_settled(&a, 1, &mut con).await;
            let first = holder.token();
            holder.unlock().await.unwrap();
            let taken = tokio::time::timeout(SOON, waiter).await.unwrap().unwrap();
            let after = settled_command_calls(&mut con).await;
            let (published, calls) = (
                delta(&before, &after, "publish"),
                delta(&before, &after, "evalsha"),
            );
            if (published, calls) != (0, 1) && rounds < 5 {
                // The waiter was looking again when the release came: once more.
                taken.unlock().await.unwrap();
                continue;
            }
            let value: String = con.get(&name).unwrap();
            assert_eq!(
                value,
                taken.owner().as_str(),
                "the value is the waiter's token"
            );
            assert_eq!(
                published, 0,
                "a hand-off publishes nothing ({rounds} rounds)"
            );
            assert_eq!(calls, 1, "one call ({rounds} rounds)");
            assert_eq!(taken.token().is_some(), fenced);
            if fenced {
                assert!(taken.token() > first, "{:?} after {first:?}", taken.token());
            }
            taken.unlock().await.unwrap();
            assert!(!mutex.is_locked().await.unwrap());
            break;
        }
    }
}

/// Another Redlock client's release publishes nothing: a waiter still gets in long before that
/// client's lease would have ended, by looking again on its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_gets_in_after_a_silent_foreign_release() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    let name = unique_name("mutex-foreign");
    let mutex = Mutex::new(&a, &name).unwrap();
    let mut con = redis.connection();
    let _: () = redis::cmd("SET")
        .arg(&name)
        .arg("peer-token")
        .arg("NX")
        .arg("PX")
        .arg(120_000)
        .query(&mut con)
        .unwrap();
    let waiter = tokio::spawn({
        let mutex = mutex.clone();
        async move {
            mutex
                .try_lock_with(AcquireOptions::new().with_wait(Duration::from_secs(60)))
                .await
        }
    });
    eventually(SOON, "the waiter subscribed", || {
        std::future::ready(mutex_waiters_subscribed(&mut con, &name) == 1)
    })
    .await;
    // Waits a while first, so that its re-checks have grown to their longest.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let deleted: i64 = redis::Script::new(PEER_RELEASE)
        .key(&name)
        .arg("peer-token")
        .invoke(&mut con)
        .unwrap();
    assert_eq!(deleted, 1);
    let guard = tokio::time::timeout(SOON, waiter)
        .await
        .expect("in long before the peer's lease (120 s) would have ended")
        .unwrap()
        .unwrap()
        .expect("taken");
    guard.unlock().await.unwrap();
}

/// `extend` sets a fixed lease anew on the server and in the guard; it refuses a hold the
/// watchdog keeps, bad leases and a hold that is gone, and then the guard is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_sets_a_fixed_lease_anew() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    let name = unique_name("mutex-extend");
    let mutex = Mutex::new(&a, &name).unwrap();
    let mut con = redis.connection();
    let fixed = AcquireOptions::new().with_lease(Duration::from_secs(2));
    let guard = mutex.lock_with(fixed).await.unwrap();
    let before = guard.lease_deadline().unwrap();
    guard.extend(Duration::from_secs(60)).await.unwrap();
    let ttl: i64 = con.pttl(&name).unwrap();
    assert!(ttl > 50_000, "{ttl}");
    let after = guard.lease_deadline().unwrap();
    assert!(
        after > before + Duration::from_secs(50),
        "the guard follows"
    );
    // Shorter works too: the guard never believes in more than the server keeps.
    guard.extend(Duration::from_secs(5)).await.unwrap();
    let ttl: i64 = con.pttl(&name).unwrap();
    assert!(ttl <= 5_000, "{ttl}");
    assert!(guard.lease_deadline().unwrap() < after);
    for bad in [Duration::ZERO, Duration::from_micros(999), Duration::MAX] {
        let err = guard.extend(bad).await.unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    }
    // Gone on the server: refused, and the guard is told.
    let _: () = con.del(&name).unwrap();
    let err = guard.extend(Duration::from_secs(60)).await.unwrap_err();
    assert!(
        matches!(err, Error::LeaseLost(LossReason::NotHeld)),
        "{err:?}"
    );
    assert_eq!(guard.loss_reason(), Some(LossReason::NotHeld));
    let exists: bool = con.exists(&name).unwrap();
    assert!(!exists, "a refused extension sets nothing");
    drop(guard);

    let watched = mutex.lock().await.unwrap();
    let err = watched.extend(Duration::from_secs(60)).await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    watched.unlock().await.unwrap();

    // A fixed lease that ran out: lost, and extending it is refused.
    let short = mutex
        .lock_with(AcquireOptions::new().with_lease(Duration::from_millis(100)))
        .await
        .unwrap();
    tokio::time::timeout(SOON, short.lost()).await.unwrap();
    let err = short.extend(Duration::from_secs(60)).await.unwrap_err();
    assert!(matches!(err, Error::LeaseLost(_)), "{err:?}");
}

/// Ten waiters of one client queued behind another client's hold: only the one at the head of
/// the client's queue looks at Redis again now and then; the others are served through it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_head_of_a_clients_queue_re_checks_redis() {
    let server = RedisServer::spawn();
    let (a, b) = (client(&server.url()).await, client(&server.url()).await);
    let name = unique_name("mutex-queue-head");
    let holder = Mutex::new(&b, &name).unwrap();
    let guard = holder.lock().await.unwrap();
    let mut con = server.connection();
    let mut waiters = Vec::new();
    for _ in 0..10 {
        let lock = Mutex::new(&a, &name).unwrap();
        waiters.push(tokio::spawn(async move {
            lock.lock().await.unwrap().unlock().await.unwrap();
        }));
    }
    eventually(SOON, "the ten wait", || {
        std::future::ready(a.waiter_stats().1 == 10)
    })
    .await;
    let before = common::command_calls(&mut con);
    let started = tokio::time::Instant::now();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let after = common::command_calls(&mut con);
    let elapsed = started.elapsed();
    // A try in vain reads the holder's TTL in the script.
    let tries = delta(&before, &after, "pttl");
    // One waiter's re-checks (every 100 ms at the most often), and a margin.
    let allowed = u64::try_from(elapsed.as_millis() / 100).unwrap() + 3;
    assert!(
        tries <= allowed,
        "{tries} tries in vain in {elapsed:?} (at most {allowed}: the head's re-checks)"
    );
    guard.unlock().await.unwrap();
    for waiter in waiters {
        tokio::time::timeout(SOON, waiter).await.unwrap().unwrap();
    }
}
