//! The blocking API against a real Redis, from plain threads with no runtime of their own
//! (`cargo test --features full,blocking --test blocking`).
#![cfg(all(feature = "blocking", feature = "full"))]
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common;

use std::sync::mpsc;
use std::time::Duration;

use common::{RedisServer, unique_name};
use ferrisson::blocking::{BlockingObject, Client};
use ferrisson::{AcquireOptions, ClientConfig, Error, LossReason};

fn client(server: &RedisServer) -> Client {
    Client::connect(&server.url()).unwrap()
}

/// A client whose watchdog renews every 300 ms (a 900 ms lease): losses are seen soon.
fn short_lease_client(url: &str) -> Client {
    Client::with_config(ClientConfig::new(url).with_lease(Duration::from_millis(900))).unwrap()
}

/// A loss callback, and what hears it.
fn heard_loss() -> (
    impl FnOnce(LossReason) + Send + 'static,
    mpsc::Receiver<LossReason>,
) {
    let (told, heard) = mpsc::channel();
    (
        move |reason| {
            let _ = told.send(reason);
        },
        heard,
    )
}

/// Polls `check` every 10 ms until it holds or `within` passes.
fn eventually(within: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now()
        .checked_add(within)
        .expect("a test's patience fits the clock");
    while !check() {
        assert!(std::time::Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_lock_is_taken_waited_for_and_released_by_plain_threads() {
    let server = RedisServer::spawn();
    let (a, b) = (client(&server), client(&server));
    let name = unique_name("blocking-lock");
    let lock = a.reentrant_lock(&name).unwrap();
    let guard = lock.lock().unwrap();
    let other = b.reentrant_lock(&name).unwrap();
    assert!(other.try_lock().unwrap().is_none(), "held elsewhere");
    let timed_out = other.lock_with(AcquireOptions::new().with_wait(Duration::from_millis(50)));
    assert!(matches!(timed_out, Err(Error::Timeout(_))), "{timed_out:?}");

    let (got, taken) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let guard = other.lock().unwrap();
        got.send(()).unwrap();
        guard.unlock().unwrap();
    });
    guard.unlock().unwrap();
    taken
        .recv_timeout(Duration::from_secs(10))
        .expect("the waiting thread got the lock once it was released");
    waiter.join().unwrap();

    // A guard dropped without unlock releases (in the background).
    let dropped = lock.lock().unwrap();
    drop(dropped);
    eventually(Duration::from_secs(5), "a dropped guard releases", || {
        !lock.is_locked().unwrap()
    });
}

#[test]
fn a_lost_hold_is_told_by_check_and_by_callback() {
    let server = RedisServer::spawn();
    let short = short_lease_client(&server.url());
    let lock = short.reentrant_lock(&unique_name("blocking-loss")).unwrap();
    let guard = lock.lock().unwrap();
    let (callback, heard) = heard_loss();
    guard.on_lost(callback);
    guard.ensure_held().unwrap();
    // Someone deletes the lock under the holder: the watchdog's next renewal finds it gone.
    let mut admin = server.connection();
    let _: () = redis::cmd("DEL")
        .arg(ferrisson::Lock::key(lock.as_async()))
        .query(&mut admin)
        .unwrap();
    let reason = heard
        .recv_timeout(Duration::from_secs(10))
        .expect("the callback ran when the hold was lost");
    assert_eq!(reason, LossReason::NotHeld);
    assert!(guard.is_lost());
    assert!(matches!(guard.ensure_held(), Err(Error::LeaseLost(_))));
    assert!(matches!(guard.unlock(), Err(Error::LeaseLost(_))));

    // A callback on a guard released in time never runs.
    let fixed = lock
        .lock_with(AcquireOptions::new().with_lease(Duration::from_millis(300)))
        .unwrap();
    let (callback, heard) = heard_loss();
    fixed.on_lost(callback);
    fixed.unlock().unwrap();
    assert!(
        heard.recv_timeout(Duration::from_millis(600)).is_err(),
        "no loss is reported after the release"
    );
}

#[test]
fn fair_and_read_write_locks_block() {
    let server = RedisServer::spawn();
    let client = client(&server);
    let fair = client.fair_lock(&unique_name("blocking-fair")).unwrap();
    let guard = fair.lock().unwrap();
    assert!(fair.try_lock().unwrap().is_none());
    guard.unlock().unwrap();

    let rw = client.read_write_lock(&unique_name("blocking-rw")).unwrap();
    let first = rw.read_lock().lock().unwrap();
    let second = rw.read_lock().lock().unwrap();
    assert!(
        rw.write_lock().try_lock().unwrap().is_none(),
        "readers keep the writer out"
    );
    first.unlock().unwrap();
    second.unlock().unwrap();
    let write = rw.write_lock().lock().unwrap();
    assert!(rw.read_lock().try_lock().unwrap().is_none());
    write.unlock().unwrap();
}

#[test]
fn semaphores_and_a_latch_block() {
    let server = RedisServer::spawn();
    let client = client(&server);
    let semaphore = client.semaphore(&unique_name("blocking-sem")).unwrap();
    assert!(semaphore.try_set_permits(2).unwrap());
    let both = semaphore.acquire_many(2).unwrap();
    assert!(
        semaphore
            .try_acquire_many_with(
                1,
                AcquireOptions::new().with_wait(Duration::from_millis(50))
            )
            .unwrap()
            .is_none()
    );
    both.release().unwrap();
    let one = semaphore.acquire_many(1).unwrap();
    drop(one);
    eventually(Duration::from_secs(5), "dropped permits come back", || {
        semaphore.available_permits().unwrap() == 2
    });

    let expirable = client
        .expirable_semaphore(&unique_name("blocking-exp"))
        .unwrap();
    assert!(expirable.try_set_permits(1).unwrap());
    let permit = expirable.acquire().unwrap();
    assert!(!permit.id().is_empty());
    permit.ensure_held().unwrap();
    assert_eq!(expirable.available_permits().unwrap(), 0);
    permit.release().unwrap();
    assert_eq!(expirable.available_permits().unwrap(), 1);

    let latch = client
        .count_down_latch(&unique_name("blocking-latch"))
        .unwrap();
    assert!(latch.try_set_count(2).unwrap());
    let waiting = latch.clone();
    let waiter = std::thread::spawn(move || waiting.wait_for(Duration::from_secs(20)).unwrap());
    assert!(latch.count_down_once("worker-1").unwrap().counted());
    assert_eq!(
        latch.count_down_once("worker-1").unwrap(),
        ferrisson::CountDown::AlreadyCounted,
        "a worker counts once"
    );
    latch.count_down().unwrap();
    assert!(
        waiter.join().unwrap(),
        "the latch opened for the waiting thread"
    );
    assert_eq!(latch.count().unwrap(), 0);
}

/// Redisson's object calls and the lock events, blocking: the same as the async calls, on
/// every blocking synchronizer.
#[test]
fn object_calls_and_lock_events_block() {
    use ferrisson::blocking::BlockingObject;

    let server = RedisServer::spawn();
    let a = client(&server);
    let b = client(&server);
    let name = unique_name("blocking-object");
    let lock = a.reentrant_lock(&name).unwrap();
    assert!(!lock.exists().unwrap());
    let guard = lock.lock().unwrap();
    let owner = guard.as_async().unwrap().owner().clone();
    assert!(lock.exists().unwrap());
    assert!(lock.is_held_by(&owner).unwrap());
    assert_eq!(lock.hold_count_of(&owner).unwrap(), 1);
    let ttl = lock.remaining_ttl().unwrap().expect("a lease");
    assert!(ttl <= Duration::from_secs(30), "{ttl:?}");
    // Another client waits until it is free, without taking it.
    let other = b.reentrant_lock(&name).unwrap();
    let (done, freed) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        other.wait_unlocked().unwrap();
        done.send(()).unwrap();
    });
    assert!(
        freed.recv_timeout(Duration::from_millis(200)).is_err(),
        "woke while held"
    );
    guard.unlock().unwrap();
    freed
        .recv_timeout(Duration::from_secs(10))
        .expect("woken by the unlock");
    waiter.join().unwrap();
    assert!(!lock.is_held_by(&owner).unwrap());
    assert!(!lock.delete().unwrap(), "nothing left to delete");

    let semaphore = a.semaphore(&unique_name("blocking-object-sem")).unwrap();
    assert!(semaphore.try_set_permits(3).unwrap());
    assert!(semaphore.expire(Duration::from_secs(60)).unwrap());
    let ttl = semaphore.remaining_ttl().unwrap().expect("an expiry");
    assert!(ttl > Duration::from_secs(50), "{ttl:?}");
    assert!(semaphore.clear_expire().unwrap());
    assert_eq!(semaphore.remaining_ttl().unwrap(), None);
    assert!(matches!(
        semaphore.expire(Duration::ZERO),
        Err(Error::InvalidArgument(_))
    ));
    assert!(semaphore.delete().unwrap());
    assert!(!semaphore.exists().unwrap());

    let latch = a
        .count_down_latch(&unique_name("blocking-object-latch"))
        .unwrap();
    assert!(latch.try_set_count(1).unwrap());
    assert!(latch.exists().unwrap());
    assert!(latch.delete().unwrap());
    assert!(!latch.exists().unwrap());
}

/// The lean mutex blocks as the other locks do; a fenced one hands out growing tokens, and a
/// fixed lease is extended from a plain thread.
#[test]
fn a_mutex_blocks_and_its_fixed_lease_is_extended() {
    let server = RedisServer::spawn();
    let (a, b) = (client(&server), client(&server));
    let name = unique_name("blocking-mutex");
    let mutex = a.mutex(&name).unwrap();
    let guard = mutex
        .lock_with(AcquireOptions::new().with_lease(Duration::from_secs(2)))
        .unwrap();
    let other = b.fenced_mutex(&name).unwrap();
    assert!(other.try_lock().unwrap().is_none(), "held elsewhere");
    guard.extend(Duration::from_secs(60)).unwrap();
    let ttl: i64 = redis::cmd("PTTL")
        .arg(&name)
        .query(&mut server.connection())
        .unwrap();
    assert!(ttl > 50_000, "{ttl}");
    assert!(guard.token().is_none());
    guard.unlock().unwrap();

    let first = other.lock().unwrap();
    let token: u64 = first.token();
    first.unlock().unwrap();
    let second = other.lock().unwrap();
    assert!(second.token() > token);
    let err = second.extend(Duration::from_secs(5)).unwrap_err();
    assert!(
        matches!(err, Error::InvalidArgument(_)),
        "watchdog-kept: {err:?}"
    );
    second.unlock().unwrap();
    assert!(!mutex.is_locked().unwrap());
}

/// A blocking fenced lock's guards and scoped work get a plain `u64` token, larger each time;
/// it is the reentrant lock of its name, and a loss during the work is told after it.
#[test]
fn a_blocking_fenced_lock_hands_its_work_a_plain_token() {
    let server = RedisServer::spawn();
    let (a, b) = (short_lease_client(&server.url()), client(&server));
    let name = unique_name("blocking-fenced");
    let ledger = a.fenced_lock(&name).unwrap();
    let first: u64 = ledger.with(|guard| guard.token()).unwrap();
    let second = ledger
        .with(|guard| {
            guard.ensure_held().unwrap();
            assert!(!guard.is_lost());
            guard.token()
        })
        .unwrap();
    assert!(second > first, "{second} after {first}");

    let guard = ledger.lock().unwrap();
    assert!(guard.token() > second);
    assert!(
        b.reentrant_lock(&name)
            .unwrap()
            .try_lock()
            .unwrap()
            .is_none(),
        "the fenced lock is the reentrant lock of its name"
    );
    assert!(ledger.try_lock().unwrap().is_none(), "another owner waits");
    guard.unlock().unwrap();
    assert!(!ledger.is_locked().unwrap());

    let lost = ledger.with(|guard| {
        ledger.force_unlock().unwrap();
        eventually(Duration::from_secs(10), "the watchdog saw the loss", || {
            guard.is_lost()
        });
        guard.token()
    });
    assert!(matches!(lost, Err(Error::LeaseLost(_))), "{lost:?}");
    let counter = format!("redisson_lock_token:{{{name}}}");
    let exists = |key: &str| -> bool {
        redis::cmd("EXISTS")
            .arg(key)
            .query(&mut server.connection())
            .unwrap()
    };
    assert!(exists(&counter), "{counter}");
    ledger.delete().unwrap();
    assert!(
        !exists(&counter),
        "deleting the lock deletes its fencing counter"
    );
}

#[test]
fn the_rest_blocks_too_semaphore_calls_spin_lock_rate_limiter_and_permit_losses() {
    let server = RedisServer::spawn();
    let c = short_lease_client(&server.url());

    // Semaphore: acquire, try_acquire, release(n).
    let sem = c.semaphore(&unique_name("blocking-sem-more")).unwrap();
    assert!(sem.try_set_permits(1).unwrap());
    let permit = sem.acquire().unwrap();
    assert!(
        sem.try_acquire().unwrap().is_none(),
        "the only permit is taken"
    );
    permit.release().unwrap();
    let again = sem.try_acquire().unwrap().unwrap();
    assert_eq!(sem.available_permits().unwrap(), 0);
    // A permit given back by count (Redisson's release(n)), no guard involved.
    sem.release(1).unwrap();
    assert_eq!(sem.available_permits().unwrap(), 1);
    again.release().unwrap();
    assert_eq!(sem.available_permits().unwrap(), 2);

    // Spin lock: taken in one thread, waited for in another.
    let name = unique_name("blocking-spin");
    let spin = c.spin_lock(&name).unwrap();
    let guard = spin.lock().unwrap();
    let (tx, rx) = mpsc::channel();
    let other = c.spin_lock(&name).unwrap();
    let waiter = std::thread::spawn(move || {
        let g = other.lock().unwrap();
        tx.send(()).unwrap();
        g.unlock().unwrap();
    });
    assert!(rx.recv_timeout(Duration::from_millis(200)).is_err(), "held");
    guard.unlock().unwrap();
    rx.recv_timeout(Duration::from_secs(10)).unwrap();
    waiter.join().unwrap();

    // Rate limiter: 2 per minute.
    let limiter = c.rate_limiter(&unique_name("blocking-rate")).unwrap();
    assert!(
        limiter
            .try_set_rate(ferrisson::RateType::Overall, 2, Duration::from_secs(60))
            .unwrap()
    );
    limiter.acquire(1).unwrap();
    assert!(limiter.try_acquire(1).unwrap());
    assert!(!limiter.try_acquire(1).unwrap());
    assert!(
        !limiter
            .try_acquire_with(
                1,
                AcquireOptions::new().with_wait(Duration::from_millis(50))
            )
            .unwrap()
    );
    assert_eq!(limiter.available_permits().unwrap(), 0);
    limiter.release(1).unwrap();
    assert_eq!(limiter.available_permits().unwrap(), 1);

    // Expirable permits: try_acquire, extend, and the loss told by callback.
    let exp_name = unique_name("blocking-exp-more");
    let exp = c.expirable_semaphore(&exp_name).unwrap();
    assert!(exp.try_set_permits(2).unwrap());
    let fixed = exp
        .acquire_with(AcquireOptions::new().with_lease(Duration::from_secs(1)))
        .unwrap();
    fixed.extend(Duration::from_secs(30)).unwrap();
    let watched = exp.try_acquire().unwrap().unwrap();
    assert!(exp.try_acquire().unwrap().is_none());
    let (callback, rx) = heard_loss();
    watched.on_lost(callback);
    // The semaphore deleted under the permits: the watchdog finds its permit gone.
    c.block_on(async {
        use ferrisson::SyncObject;
        ferrisson::ExpirableSemaphore::new(c.async_client(), &exp_name)
            .unwrap()
            .delete()
            .await
            .unwrap()
    })
    .unwrap();
    let reason = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(reason, LossReason::NotHeld);
    assert!(watched.is_lost());
    assert!(matches!(
        fixed.extend(Duration::from_secs(30)),
        Err(Error::LeaseLost(_))
    ));
}

#[test]
fn multilocks_and_redlocks_block_and_tell_their_loss() {
    // A MultiLock over two locks, against another client's MultiLock over the same two (in the
    // other order) and a thread waiting for it.
    let server = RedisServer::spawn();
    let (a, b) = (client(&server), client(&server));
    let (from, to) = (unique_name("blocking-multi"), unique_name("blocking-multi"));
    let both = a
        .multi_lock(vec![
            a.reentrant_lock(&from).unwrap().into(),
            a.reentrant_lock(&to).unwrap().into(),
        ])
        .unwrap();
    assert_eq!(both.keys().len(), 2);
    let guard = both.lock().unwrap();
    guard.ensure_held().unwrap();
    let other = b
        .multi_lock(vec![
            b.reentrant_lock(&to).unwrap().into(),
            b.reentrant_lock(&from).unwrap().into(),
        ])
        .unwrap();
    assert!(other.try_lock().unwrap().is_none(), "held by the first");
    assert!(
        b.reentrant_lock(&to).unwrap().try_lock().unwrap().is_none(),
        "each lock of the group is held"
    );
    let (got, taken) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let guard = other.lock().unwrap();
        got.send(()).unwrap();
        guard.unlock().unwrap();
    });
    guard.unlock().unwrap();
    taken
        .recv_timeout(Duration::from_secs(10))
        .expect("the waiting thread got both locks once they were released");
    waiter.join().unwrap();

    // A RedLock over three instances, each through a blocking client of its own.
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::spawn()).collect();
    let clients: Vec<Client> = servers
        .iter()
        .map(|s| short_lease_client(&s.url()))
        .collect();
    let name = unique_name("blocking-red");
    let red_lock = |by: &Client| {
        by.red_lock(
            clients
                .iter()
                .map(|c| c.fenced_lock(&name).unwrap().into())
                .collect(),
        )
        .unwrap()
    };
    let red = red_lock(&clients[0]);
    assert_eq!(red.as_async().quorum(), 2);
    let guard = red.lock().unwrap();
    assert!(
        guard.token().is_some(),
        "fenced locks give the group a token"
    );
    assert!(guard.valid_until().is_none(), "the watchdogs keep it");
    let (callback, heard) = heard_loss();
    guard.on_lost(callback);
    assert!(
        red_lock(&clients[1]).try_lock().unwrap().is_none(),
        "no second quorum"
    );

    // One instance's hold deleted: the watchdog sees it, and the quorum still holds.
    let key = red.keys()[0].to_owned();
    let delete_on = |server: &RedisServer| {
        let _: () = redis::cmd("DEL")
            .arg(&key)
            .query(&mut server.connection())
            .unwrap();
    };
    delete_on(&servers[0]);
    eventually(
        Duration::from_secs(10),
        "the watchdog saw one hold gone",
        || {
            guard
                .as_async()
                .unwrap()
                .holds()
                .iter()
                .any(ferrisson::HoldGuard::is_lost)
        },
    );
    guard.ensure_held().unwrap();
    assert!(heard.try_recv().is_err(), "no loss while a quorum holds");

    // A second one: short of the quorum, the guard is lost and the callback runs.
    delete_on(&servers[1]);
    let reason = heard
        .recv_timeout(Duration::from_secs(10))
        .expect("the callback ran when the quorum was lost");
    assert_eq!(reason, LossReason::NotHeld);
    assert!(guard.is_lost());
    assert!(matches!(guard.unlock(), Err(Error::LeaseLost(_))));

    // A fixed lease gives a validity, and a released guard's callback never runs.
    let fixed = red
        .lock_with(AcquireOptions::new().with_lease(Duration::from_millis(400)))
        .unwrap();
    assert!(fixed.valid_until().unwrap() > std::time::Instant::now());
    let (callback, heard) = heard_loss();
    fixed.on_lost(callback);
    fixed.unlock().unwrap();
    assert!(
        heard.recv_timeout(Duration::from_millis(800)).is_err(),
        "no loss is reported after the release"
    );
}

#[test]
fn every_call_of_the_semaphores_rate_limiter_and_locks_has_a_blocking_form() {
    let server = RedisServer::spawn();
    let short = short_lease_client(&server.url());
    let other = client(&server);

    // The semaphore.
    let semaphore = short.semaphore(&unique_name("blocking-all-sem")).unwrap();
    semaphore.set_permits(4).unwrap();
    assert_eq!(semaphore.add_permits(2).unwrap(), 6);
    let three = semaphore.try_acquire_many(3).unwrap().expect("3 of 6 free");
    assert_eq!(three.count(), 3);
    assert!(semaphore.try_acquire_many(4).unwrap().is_none(), "3 free");
    let one = semaphore
        .try_acquire_with(AcquireOptions::new().with_wait(Duration::from_millis(50)))
        .unwrap()
        .expect("one free");
    one.forget();
    assert_eq!(semaphore.available_permits().unwrap(), 2);
    assert_eq!(
        semaphore
            .with(|_| semaphore.available_permits().unwrap())
            .unwrap(),
        1,
        "the work runs with a permit taken"
    );
    assert_eq!(
        semaphore.available_permits().unwrap(),
        2,
        "and it came back"
    );
    assert_eq!(semaphore.drain_permits().unwrap(), 2);
    three.release().unwrap();
    assert!(semaphore.release_if_exists(1).unwrap(), "the forgotten one");
    assert_eq!(semaphore.available_permits().unwrap(), 4);
    let absent = short.semaphore(&unique_name("blocking-all-none")).unwrap();
    assert!(!absent.release_if_exists(1).unwrap());
    assert!(
        absent
            .try_set_permits_with_ttl(2, Duration::from_secs(60))
            .unwrap()
    );
    assert!(absent.remaining_ttl().unwrap().is_some());

    // The expirable semaphore.
    let expirable = short
        .expirable_semaphore(&unique_name("blocking-all-exp"))
        .unwrap();
    expirable.set_permits(3).unwrap();
    assert_eq!(expirable.add_permits(1).unwrap(), 4);
    let two = expirable.acquire_many(2).unwrap();
    assert_eq!(two.len(), 2);
    assert_eq!(expirable.acquired_permits().unwrap(), 2);
    assert_eq!(expirable.total_permits().unwrap(), 4);
    assert!(expirable.try_acquire_many(3).unwrap().is_none(), "2 free");
    let fixed = expirable
        .try_acquire_many_with(
            2,
            AcquireOptions::new()
                .with_lease(Duration::from_secs(30))
                .with_wait(Duration::from_millis(50)),
        )
        .unwrap()
        .expect("2 free");
    assert!(
        expirable
            .try_acquire_with(AcquireOptions::new())
            .unwrap()
            .is_none()
    );
    // Permits by id: detached, their leases read and set, released by id.
    let ids: Vec<String> = fixed.into_iter().map(|p| p.detach()).collect();
    let lease = expirable.remaining_lease(&ids[0]).unwrap().expect("held");
    assert!(lease > Duration::from_secs(20) && lease <= Duration::from_secs(30));
    assert!(
        expirable
            .update_lease(&ids[0], Duration::from_secs(60))
            .unwrap()
    );
    assert!(expirable.remaining_lease(&ids[0]).unwrap().unwrap() > Duration::from_secs(50));
    assert!(expirable.try_release(&ids[0]).unwrap());
    assert!(!expirable.try_release(&ids[0]).unwrap(), "released already");
    assert!(matches!(
        expirable.release_all(&[&ids[0], &ids[1]]),
        Err(Error::NotOwner(_))
    ));
    assert_eq!(expirable.try_release_many(&[&ids[0], &ids[1]]).unwrap(), 1);
    let more: Vec<String> = expirable
        .acquire_many_with(2, AcquireOptions::new().with_lease(Duration::from_secs(30)))
        .unwrap()
        .into_iter()
        .map(|p| p.detach())
        .collect();
    expirable.release(&more[0]).unwrap();
    expirable.release_all(&[&more[1]]).unwrap();
    for permit in two {
        permit.release().unwrap();
    }
    assert_eq!(expirable.available_permits().unwrap(), 4);
    assert_eq!(
        expirable
            .with(|permit| {
                permit.ensure_held().unwrap();
                expirable.acquired_permits().unwrap()
            })
            .unwrap(),
        1
    );
    assert_eq!(expirable.acquired_permits().unwrap(), 0);

    // The rate limiter's configuration.
    let limiter = short
        .rate_limiter(&unique_name("blocking-all-rate"))
        .unwrap();
    assert!(
        !limiter
            .update_rate(ferrisson::RateArgs::new(
                ferrisson::RateType::Overall,
                1,
                Duration::from_secs(1)
            ))
            .unwrap(),
        "no rate yet"
    );
    let args = ferrisson::RateArgs::new(ferrisson::RateType::Overall, 5, Duration::from_secs(1))
        .keep_alive(Duration::from_secs(60));
    assert!(limiter.try_set_rate_with(args).unwrap());
    assert_eq!(
        limiter.rate().unwrap(),
        Some((ferrisson::RateType::Overall, 5, Duration::from_secs(1)))
    );
    let faster = ferrisson::RateArgs::new(ferrisson::RateType::Overall, 7, Duration::from_secs(1));
    assert!(limiter.update_rate(faster).unwrap());
    limiter
        .set_rate_with(ferrisson::RateArgs::new(
            ferrisson::RateType::PerClient,
            3,
            Duration::from_secs(2),
        ))
        .unwrap();
    assert_eq!(
        limiter.rate().unwrap(),
        Some((ferrisson::RateType::PerClient, 3, Duration::from_secs(2)))
    );

    // The read-write lock as a whole, the fair lock's queue, and a lock's own calls.
    let rw = short
        .read_write_lock(&unique_name("blocking-all-rw"))
        .unwrap();
    assert_eq!(rw.mode().unwrap(), None);
    let read = rw.read_lock().lock().unwrap();
    assert!(rw.is_locked().unwrap());
    assert_eq!(rw.mode().unwrap(), Some(ferrisson::Mode::Read));
    assert!(rw.force_unlock().unwrap());
    assert!(!rw.is_locked().unwrap());
    let unlocked = read.unlock();
    // Released under the holder before its watchdog looked: the unlock finds it not held.
    assert!(
        matches!(unlocked, Err(Error::NotOwner(_) | Error::LeaseLost(_))),
        "{unlocked:?}"
    );

    let fair_name = unique_name("blocking-all-fair");
    let fair = short.fair_lock(&fair_name).unwrap();
    let held = fair.lock().unwrap();
    let waiting = other.fair_lock(&fair_name).unwrap();
    let waiter = std::thread::spawn(move || waiting.lock().unwrap().unlock().unwrap());
    eventually(Duration::from_secs(10), "one waits in the queue", || {
        fair.queue_length().unwrap() == 1
    });
    held.unlock().unwrap();
    waiter.join().unwrap();
    assert_eq!(fair.queue_length().unwrap(), 0);

    let lock = short
        .reentrant_lock(&unique_name("blocking-all-lock"))
        .unwrap();
    let guard = lock.lock().unwrap();
    let mine = short.wrap(
        lock.as_async()
            .owned_by(guard.as_async().unwrap().owner().clone()),
    );
    assert_eq!(mine.hold_count().unwrap(), 1);
    assert!(mine.is_held_by_current().unwrap());
    guard.unlock().unwrap();
    assert_eq!(mine.hold_count().unwrap(), 0);
    assert!(!mine.is_held_by_current().unwrap());
    let out = lock
        .with(|guard| {
            guard.ensure_held().unwrap();
            lock.is_locked().unwrap()
        })
        .unwrap();
    assert!(out, "the work ran under the lock");
    assert!(!lock.is_locked().unwrap(), "and it was released");
    // A hold lost while the work ran (its watchdog saw it): LeaseLost, after the work.
    let lost = lock.with(|guard| {
        lock.force_unlock().unwrap();
        eventually(Duration::from_secs(10), "the watchdog saw the loss", || {
            guard.is_lost()
        });
    });
    assert!(matches!(lost, Err(Error::LeaseLost(_))), "{lost:?}");
}

#[test]
fn a_faster_multilock_blocks_and_unlocks_a_part() {
    let server = RedisServer::spawn();
    let (a, b) = (client(&server), client(&server));
    let group = unique_name("blocking-fml");
    let lock = a.faster_multilock(&group, ["1", "2", "3"]).unwrap();
    let guard = lock.lock().unwrap();
    let part = lock.as_async().part(["1"]).unwrap();
    let kept = lock
        .unlock_part(&part, guard)
        .unwrap()
        .expect("2 and 3 kept");
    let other = |v: &[&str]| b.faster_multilock(&group, v.to_vec()).unwrap();
    other(&["1"])
        .try_lock()
        .unwrap()
        .expect("1 unlocked")
        .unlock()
        .unwrap();
    assert!(
        other(&["2", "3"]).try_lock().unwrap().is_none(),
        "2 and 3 held"
    );
    kept.unlock().unwrap();
    other(&["1", "2", "3"]).lock().unwrap().unlock().unwrap();
}

#[test]
fn a_blocking_group_extends_and_runs_scoped_work() {
    let server = RedisServer::spawn();
    let short = short_lease_client(&server.url());
    let (a, b) = (unique_name("blocking-group"), unique_name("blocking-group"));
    let group = short
        .multi_lock(vec![
            short.reentrant_lock(&a).unwrap().into(),
            short.reentrant_lock(&b).unwrap().into(),
        ])
        .unwrap();
    let pttl = |key: &str| -> i64 {
        redis::cmd("PTTL")
            .arg(key)
            .query(&mut server.connection())
            .unwrap()
    };
    let guard = group
        .lock_with(AcquireOptions::new().with_lease(Duration::from_secs(2)))
        .unwrap();
    guard.extend(Duration::from_secs(30)).unwrap();
    assert!(pttl(&a) > 25_000 && pttl(&b) > 25_000, "both extended");
    guard.unlock().unwrap();

    let held = group
        .with(|guard| {
            guard.ensure_held().unwrap();
            pttl(&a) > 0 && pttl(&b) > 0
        })
        .unwrap();
    assert!(held, "the work ran with both held");
    assert_eq!((pttl(&a), pttl(&b)), (-2, -2), "and both were released");
    // A loss while the work ran (the watchdog saw it): LeaseLost after the work.
    let lost = group.with(|guard| {
        let _: () = redis::cmd("DEL")
            .arg(&a)
            .query(&mut server.connection())
            .unwrap();
        eventually(Duration::from_secs(10), "the watchdog saw the loss", || {
            guard.is_lost()
        });
    });
    assert!(matches!(lost, Err(Error::LeaseLost(_))), "{lost:?}");
}

#[test]
fn configured_handles_block_too_limits_waiter_timeouts_and_backoff() {
    let server = RedisServer::spawn();
    let client = client(&server);

    // A limit sets the count at the first acquisition.
    let semaphore = client
        .semaphore(&unique_name("blocking-limit"))
        .unwrap()
        .with_limit(3)
        .unwrap();
    let permit = semaphore.acquire().unwrap();
    assert_eq!(semaphore.available_permits().unwrap(), 2);
    permit.release().unwrap();
    assert!(client.semaphore("x").unwrap().with_limit(0).is_err());
    let expirable = client
        .expirable_semaphore(&unique_name("blocking-limit"))
        .unwrap()
        .with_limit(2)
        .unwrap();
    let permit = expirable.acquire().unwrap();
    assert_eq!(expirable.available_permits().unwrap(), 1);
    permit.release().unwrap();

    // A fair lock's waiter timeout, a spin lock's backoff.
    let fair = client
        .fair_lock(&unique_name("blocking-fair-timeout"))
        .unwrap();
    assert!(matches!(
        fair.with_waiter_timeout(Duration::from_millis(10)),
        Err(Error::InvalidArgument(_))
    ));
    let fair = fair.with_waiter_timeout(Duration::from_secs(1)).unwrap();
    fair.lock().unwrap().unlock().unwrap();
    let spin = client
        .spin_lock(&unique_name("blocking-backoff"))
        .unwrap()
        .with_backoff(ferrisson::Backoff::fixed(Duration::from_millis(5)))
        .unwrap();
    let held = spin.lock().unwrap();
    let other = client
        .spin_lock(ferrisson::Lock::key(spin.as_async()))
        .unwrap();
    assert!(
        other
            .try_lock_with(AcquireOptions::new().with_wait(Duration::from_millis(30)))
            .unwrap()
            .is_none()
    );
    held.unlock().unwrap();
    assert!(
        spin.with_backoff(ferrisson::Backoff::fixed(Duration::ZERO))
            .is_err()
    );
}

/// The blocking client's shutdown gives back what live guards and permits still hold, and
/// says so; their own release afterwards has nothing left to release.
#[test]
fn a_blocking_shutdown_gives_back_what_live_guards_hold() {
    let server = RedisServer::spawn();
    let client = client(&server);
    let name = unique_name("blocking-shutdown");
    let lock = client.reentrant_lock(&name).unwrap();
    let guard = lock.lock().unwrap();
    let semaphore = client.semaphore(&format!("{name}:sem")).unwrap();
    assert!(semaphore.try_set_permits(1).unwrap());
    let permits = semaphore.acquire().unwrap();
    let report = client.shutdown_report(Duration::ZERO).unwrap();
    assert!(report.is_complete(), "{report}");
    assert_eq!(report.given_back.len(), 2, "{report}");
    let other = Client::connect(&server.url()).unwrap();
    assert!(!other.reentrant_lock(&name).unwrap().is_locked().unwrap());
    assert_eq!(
        other
            .semaphore(&format!("{name}:sem"))
            .unwrap()
            .available_permits()
            .unwrap(),
        1
    );
    assert!(matches!(
        guard.unlock(),
        Err(Error::LeaseLost(LossReason::ClientShutDown))
    ));
    assert!(matches!(
        permits.release(),
        Err(Error::LeaseLost(LossReason::ClientShutDown))
    ));
}

/// Inside a Tokio runtime every blocking call, connect included, is `WouldDeadlock` (Tokio
/// would panic), and does nothing; a client made outside and dropped inside does not panic.
#[test]
fn calls_inside_a_runtime_are_refused_with_an_error_not_a_panic() {
    let server = RedisServer::spawn();
    let outside = client(&server);
    let name = unique_name("blocking-in-runtime");
    let lock = outside.reentrant_lock(&name).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let url = server.url();
    runtime.block_on(async {
        assert!(matches!(
            Client::connect(&url),
            Err(ferrisson::Error::WouldDeadlock(_))
        ));
        assert!(matches!(
            lock.lock(),
            Err(ferrisson::Error::WouldDeadlock(_))
        ));
        assert!(matches!(
            outside.block_on(async { 1 }),
            Err(ferrisson::Error::WouldDeadlock(_))
        ));
        // On a spawn_blocking thread too: Tokio cannot tell it from a worker for us.
        let in_pool = outside.clone();
        let refused =
            tokio::task::spawn_blocking(move || in_pool.reentrant_lock("x").unwrap().is_locked())
                .await
                .unwrap();
        assert!(matches!(refused, Err(ferrisson::Error::WouldDeadlock(_))));
    });
    // Nothing was taken: outside the runtime the lock is free, and calls work again.
    assert!(!lock.is_locked().unwrap());
    let dropped_inside = client(&server);
    runtime.block_on(async move { drop(dropped_inside) });
}

/// Deadlock detection tells the blocking API's threads apart (each call runs on the caller's
/// thread, outside any Tokio task): a thread that holds a lock and waits for nothing does not
/// make another thread of the same client, which waits, look like it holds that lock.
#[test]
fn deadlock_detection_tells_blocking_threads_apart() {
    let server = RedisServer::spawn();
    let config =
        || ClientConfig::new(server.url()).with_deadlock_detection(Duration::from_millis(50));
    let blocking = Client::with_config(config()).unwrap();
    let other = Client::with_config(config()).unwrap();
    let name = unique_name("threads");
    let (a, b) = (format!("{name}:a"), format!("{name}:b"));
    let waiting = AcquireOptions::new().with_wait(Duration::from_secs(20));
    // `other`'s thread holds B; the first blocking thread holds A (and waits for nothing).
    let held_b = other.reentrant_lock(&b).unwrap().lock().unwrap();
    let held_a = blocking.reentrant_lock(&a).unwrap().lock().unwrap();
    std::thread::scope(|s| {
        // A second thread of `blocking` waits for B; `other`'s second thread waits for A.
        let for_b = s.spawn(|| {
            blocking
                .reentrant_lock(&b)
                .unwrap()
                .try_lock_with(waiting)
                .map(|g| g.is_some())
        });
        let for_a = s.spawn(|| {
            other
                .reentrant_lock(&a)
                .unwrap()
                .try_lock_with(waiting)
                .map(|g| g.is_some())
        });
        // Long enough for both waits to be on record and looked at many times.
        std::thread::sleep(Duration::from_millis(800));
        drop(held_a);
        let got_a = for_a.join().unwrap();
        assert!(matches!(got_a, Ok(true)), "{got_a:?}");
        drop(held_b);
        let got_b = for_b.join().unwrap();
        assert!(matches!(got_b, Ok(true)), "{got_b:?}");
    });
}
