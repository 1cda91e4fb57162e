//! Who holds what, read from code (`Client::inspect`, `Client::list_objects`) and the
//! client records behind it, against a real Redis: every kind's holders, waiters and permits,
//! ferrisson clients named by their record, Redisson owners by their id, and no read that
//! changes anything.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use ferrisson::{
    AcquireOptions, Client, ClientConfig, CountDownLatch, Error, ExpirableSemaphore, FairLock,
    HoldMode, Lock, Mutex, ObjectKind, Party, RateLimiter, RateType, ReadWriteLock, ReentrantLock,
    Semaphore, SpinLock,
};
use futures::StreamExt;

const SOON: Duration = Duration::from_secs(10);

async fn named(url: &str, app: &str) -> Client {
    Client::with_config(ClientConfig::new(url).with_app_name(app))
        .await
        .unwrap()
}

fn record_of(party: &Party) -> &ferrisson::ClientRecord {
    match party {
        Party::Ferrisson(r) => r,
        other => panic!("expected a ferrisson client's record, got {other:?}"),
    }
}

/// Every key of the server with its value's dump and whether it expires: what a read must
/// leave as it found it.
fn snapshot(con: &mut redis::Connection) -> BTreeMap<Vec<u8>, (Vec<u8>, bool)> {
    let keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(con).unwrap();
    keys.into_iter()
        .filter_map(|k| {
            let dump: Option<Vec<u8>> = redis::cmd("DUMP").arg(&k).query(con).unwrap();
            let ttl: i64 = redis::cmd("PTTL").arg(&k).query(con).unwrap();
            dump.map(|d| (k, (d, ttl >= 0)))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_names_its_connection_and_keeps_a_record_for_one_lease() {
    let server = RedisServer::spawn();
    let client = Client::with_config(
        ClientConfig::new(server.url())
            .with_app_name("nightly close")
            .with_lease(Duration::from_secs(2)),
    )
    .await
    .unwrap();
    let tag = &client.id().replace('-', "")[..16];
    assert_eq!(
        client.connection_name(),
        format!("ferrisson:nightly_close:{tag}")
    );
    let mut con = server.connection();
    eventually(SOON, "the connection is named", || {
        let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut con).unwrap();
        let name = format!("name=ferrisson:nightly_close:{tag} ");
        async move { list.contains(&name) }
    })
    .await;
    let key = format!("ferrisson_client:{tag}");
    let record = client.client_record(client.id()).await.unwrap().unwrap();
    assert_eq!(record.id, client.id());
    assert_eq!(record.app, "nightly close");
    assert_eq!(record.pid, Some(std::process::id()));
    assert_eq!(record.version, env!("CARGO_PKG_VERSION"));
    assert!(!record.host.is_empty());
    let started = record.started_at.unwrap().elapsed().unwrap_or_default();
    assert!(started < Duration::from_secs(60), "started {started:?} ago");
    let ttl: i64 = redis::cmd("PTTL").arg(&key).query(&mut con).unwrap();
    assert!(
        (1..=2000).contains(&ttl),
        "the record lives one lease: {ttl}"
    );
    // A live client keeps it: after two leases it is still there.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(4);
    while tokio::time::Instant::now() < deadline {
        let exists: bool = redis::cmd("EXISTS").arg(&key).query(&mut con).unwrap();
        assert!(exists, "a live client's record never lapses");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // A client gone without a shutdown leaves it for at most one lease.
    drop(client);
    eventually(
        Duration::from_secs(4),
        "the dead client's record expires",
        || {
            let exists: bool = redis::cmd("EXISTS").arg(&key).query(&mut con).unwrap();
            async move { !exists }
        },
    )
    .await;
}

#[tokio::test]
async fn a_shutdown_deletes_the_record_and_records_can_be_turned_off() {
    let server = RedisServer::spawn();
    let mut con = server.connection();
    let client = named(&server.url(), "shutting-down").await;
    client.refresh_record().await.unwrap();
    let key = format!("ferrisson_client:{}", &client.id().replace('-', "")[..16]);
    let exists: bool = redis::cmd("EXISTS").arg(&key).query(&mut con).unwrap();
    assert!(exists);
    client.shutdown().await.unwrap();
    let exists: bool = redis::cmd("EXISTS").arg(&key).query(&mut con).unwrap();
    assert!(!exists, "a shutdown deletes the record");

    let quiet = Client::with_config(ClientConfig::new(server.url()).with_client_record(false))
        .await
        .unwrap();
    let lock = ReentrantLock::new(&quiet, "quiet").unwrap();
    let guard = lock.lock().await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("ferrisson_client:*")
        .query(&mut con)
        .unwrap();
    assert!(keys.is_empty(), "records off: no record, got {keys:?}");
    assert!(matches!(
        quiet.refresh_record().await,
        Err(Error::InvalidArgument(_))
    ));
    // Its holds read as a client with no record.
    let info = quiet.inspect("quiet").await.unwrap();
    assert_eq!(
        info.holders[0].party,
        Party::Unrecorded {
            client_id: quiet.id().to_owned()
        }
    );
    guard.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_show_their_holders_waiters_leases_and_tokens() {
    let redis = TestRedis::any();
    let holder = named(&redis.url(), "holder-app").await;
    let waiter = named(&redis.url(), "waiter-app").await;
    let name = unique_name("inspect-lock");
    let lock = ReentrantLock::fenced(&holder, &name).unwrap();
    let owner = holder.new_owner();
    let bound = lock.owned_by(owner.clone());
    let first = bound.lock().await.unwrap();
    let again = bound.lock().await.unwrap();
    let token = again.token().unwrap();
    let waiting = {
        let lock = ReentrantLock::fenced(&waiter, &name).unwrap();
        tokio::spawn(async move { lock.lock().await.unwrap().unlock().await.unwrap() })
    };
    eventually(SOON, "the waiter subscribes", || async {
        waiter.inspect(&name).await.unwrap().subscribers == Some(1)
    })
    .await;
    let info = waiter.inspect(&name).await.unwrap();
    assert_eq!(info.kind, Some(ObjectKind::Lock));
    assert!(info.kind_certain, "a fenced lock's token tells it");
    assert_eq!(info.holders.len(), 1);
    let h = &info.holders[0];
    assert_eq!(h.owner, owner.as_str());
    assert_eq!((h.mode, h.count), (HoldMode::Exclusive, 2));
    let left = h.lease_left.unwrap();
    assert!(left <= Duration::from_secs(30) && left > Duration::from_secs(20));
    let record = record_of(&h.party);
    assert_eq!(
        (record.app.as_str(), record.id.as_str()),
        ("holder-app", holder.id())
    );
    assert_eq!(record.pid, Some(std::process::id()));
    assert_eq!(info.fencing_token, Some(token));
    assert!(
        info.summary().contains("held exclusive by holder-app on"),
        "{}",
        info.summary()
    );
    drop(again);
    first.unlock().await.unwrap();
    tokio::time::timeout(SOON, waiting).await.unwrap().unwrap();
    let free = holder.inspect(&name).await.unwrap();
    assert!(free.holders.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redisson_holder_shows_its_client_id_and_a_peer_mutex_holder_is_unknown() {
    let redis = TestRedis::any();
    let client = client(&redis.url()).await;
    let mut con = redis.connection();
    let name = unique_name("inspect-redisson");
    let redisson = "0b9c3a1e-5d2f-4b7a-9c1d-2e3f4a5b6c7d:57";
    let _: () = redis::cmd("HSET")
        .arg(&name)
        .arg(redisson)
        .arg(1)
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("PEXPIRE")
        .arg(&name)
        .arg(30_000)
        .query(&mut con)
        .unwrap();
    let info = client.inspect(&name).await.unwrap();
    assert_eq!(info.kind, Some(ObjectKind::Lock));
    assert_eq!(
        info.holders[0].party,
        Party::Unrecorded {
            client_id: "0b9c3a1e-5d2f-4b7a-9c1d-2e3f4a5b6c7d".into()
        }
    );
    assert!(
        info.summary().contains("Redisson client 0b9c3a1e"),
        "{}",
        info.summary()
    );

    let peer = unique_name("inspect-peer");
    let _: () = redis::cmd("SET")
        .arg(&peer)
        .arg("f3a9c0ffee")
        .arg("PX")
        .arg(30_000)
        .query(&mut con)
        .unwrap();
    let mutex: ObjectKind = "mutex".parse().unwrap();
    let info = client.inspect_as(&peer, mutex).await.unwrap();
    assert_eq!(info.holders[0].owner, "f3a9c0ffee");
    assert_eq!(info.holders[0].party, Party::Unknown);
    assert!(!client.inspect(&peer).await.unwrap().kind_certain);
}

/// The fair lock reads its own layout (its crate's registered inspection): an idle fair lock's
/// hash is a lock's unless the fair lock is named, and its queue, which outlives the hash,
/// is told with nothing stored under the name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_lock_is_read_by_its_own_crate_and_its_queue_outlives_its_hash() {
    let redis = TestRedis::any();
    let holder = named(&redis.url(), "fair-holder").await;
    let fair: ObjectKind = "fair-lock".parse().unwrap();
    let name = unique_name("inspect-fair-own");
    let guard = FairLock::new(&holder, &name).unwrap().lock().await.unwrap();
    // Idle (no queue): the hash of any lock, unless named.
    assert_eq!(
        holder.inspect(&name).await.unwrap().kind,
        Some(ObjectKind::Lock)
    );
    let named_fair = holder.inspect_as(&name, fair).await.unwrap();
    assert_eq!(named_fair.kind, Some(fair));
    assert_eq!(record_of(&named_fair.holders[0].party).app, "fair-holder");
    // A waiter queues, in a process of its own as it were; then the hash goes (its holder's
    // lease over, say) while that process is frozen, so that it cannot look again before the
    // inspection: the queue alone is still a fair lock's, with its waiter.
    let mut waiter = {
        let (url, name) = (redis.url(), name.clone());
        common::frozen::FrozenThread::spawn(move || async move {
            let waiter = named(&url, "fair-waiter").await;
            let lock = FairLock::new(&waiter, &name).unwrap();
            lock.lock().await.unwrap().unlock().await.unwrap();
        })
    };
    eventually(SOON, "the waiter queues", || async {
        holder.inspect(&name).await.unwrap().queue_length == 1
    })
    .await;
    waiter.freeze().await;
    guard.detach();
    let mut con = redis.connection();
    let _: () = redis::cmd("DEL").arg(&name).query(&mut con).unwrap();
    let info = holder.inspect(&name).await.unwrap();
    assert_eq!(info.kind, Some(fair), "{info:?}");
    assert!(info.holders.is_empty());
    assert_eq!(info.waiters.len(), 1);
    assert_eq!(record_of(&info.waiters[0].party).app, "fair-waiter");
    // Thawed and woken by nothing (the hash was deleted, not released): it takes the lock at
    // its next look, within its lease's worth of re-checks.
    tokio::time::timeout(Duration::from_secs(40), waiter.join())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_locks_queue_and_a_spin_locks_next_in_line_are_its_waiters() {
    let redis = TestRedis::any();
    let holder = named(&redis.url(), "fair-holder").await;
    let waiter = named(&redis.url(), "fair-waiter").await;
    let name = unique_name("inspect-fair");
    let guard = FairLock::new(&holder, &name).unwrap().lock().await.unwrap();
    let mut waiting = Vec::new();
    for _ in 0..3 {
        let lock = FairLock::new(&waiter, &name).unwrap();
        waiting.push(tokio::spawn(async move {
            lock.lock().await.unwrap().unlock().await.unwrap();
        }));
        let before = waiting.len() as u64;
        eventually(SOON, "the waiter queues", || async {
            holder.inspect(&name).await.unwrap().queue_length == before
        })
        .await;
    }
    let info = holder.inspect(&name).await.unwrap();
    assert_eq!(info.kind.map(ObjectKind::as_str), Some("fair-lock"));
    assert_eq!(info.waiters.len(), 3);
    let mut last = Duration::ZERO;
    for (i, w) in info.waiters.iter().enumerate() {
        assert_eq!(w.place, i);
        assert_eq!(record_of(&w.party).app, "fair-waiter");
        let timeout = w.timeout_in.unwrap();
        assert!(timeout > last, "each place's timeout is later: {timeout:?}");
        last = timeout;
        assert!(
            w.alive_for.is_some(),
            "a ferrisson waiter's liveness deadline"
        );
    }
    assert_eq!(record_of(&info.holders[0].party).app, "fair-holder");
    guard.unlock().await.unwrap();
    for w in waiting {
        tokio::time::timeout(SOON, w).await.unwrap().unwrap();
    }

    let spin = unique_name("inspect-spin");
    let held = SpinLock::new(&holder, &spin).unwrap().lock().await.unwrap();
    let spinning = {
        let lock = SpinLock::new(&waiter, &spin).unwrap();
        tokio::spawn(async move { lock.lock().await.unwrap().unlock().await.unwrap() })
    };
    eventually(SOON, "the spinner reserves the next turn", || async {
        holder
            .inspect(&spin)
            .await
            .unwrap()
            .kind
            .map(ObjectKind::as_str)
            == Some("spin-lock")
    })
    .await;
    let info = holder.inspect(&spin).await.unwrap();
    assert_eq!(record_of(&info.waiters[0].party).app, "fair-waiter");
    assert_eq!(record_of(&info.holders[0].party).app, "fair-holder");
    held.unlock().await.unwrap();
    tokio::time::timeout(SOON, spinning).await.unwrap().unwrap();
    // Idle, with no reservation: a lock hash, a spin lock's only when named (its own crate
    // reads it then).
    let idle = SpinLock::new(&holder, &spin).unwrap().lock().await.unwrap();
    eventually(SOON, "the reservation is gone", || async {
        holder.inspect(&spin).await.unwrap().kind == Some(ObjectKind::Lock)
    })
    .await;
    let as_spin = holder
        .inspect_as(&spin, "spin-lock".parse().unwrap())
        .await
        .unwrap();
    assert_eq!(as_spin.kind.map(ObjectKind::as_str), Some("spin-lock"));
    assert_eq!(record_of(&as_spin.holders[0].party).app, "fair-holder");
    assert!(as_spin.waiters.is_empty());
    idle.unlock().await.unwrap();
}

#[tokio::test]
async fn a_read_write_lock_shows_readers_and_the_writer_with_their_leases() {
    let redis = TestRedis::any();
    let a = named(&redis.url(), "reader-a").await;
    let b = named(&redis.url(), "reader-b").await;
    let name = unique_name("inspect-rw");
    let r1 = ReadWriteLock::new(&a, &name)
        .unwrap()
        .read_lock()
        .lock()
        .await
        .unwrap();
    let r2 = ReadWriteLock::new(&b, &name)
        .unwrap()
        .read_lock()
        .lock_with(AcquireOptions::new().with_lease(Duration::from_secs(5)))
        .await
        .unwrap();
    let info = a.inspect(&name).await.unwrap();
    assert_eq!(info.kind, Some("rwlock".parse().unwrap()));
    assert!(info.kind_certain);
    assert_eq!(info.holders.len(), 2);
    for h in &info.holders {
        assert_eq!((h.mode, h.count), (HoldMode::Read, 1));
        let app = record_of(&h.party).app.clone();
        let left = h.lease_left.unwrap();
        match app.as_str() {
            "reader-a" => assert!(left > Duration::from_secs(20), "{left:?}"),
            "reader-b" => assert!(left <= Duration::from_secs(5), "{left:?}"),
            other => panic!("unexpected holder {other}"),
        }
    }
    drop((r1, r2));
    let rw = ReadWriteLock::new(&a, &name).unwrap();
    eventually(SOON, "the readers left", || async {
        !rw.is_locked().await.unwrap()
    })
    .await;
    let w = rw.write_lock().lock().await.unwrap();
    let info = b.inspect(&name).await.unwrap();
    assert_eq!(info.holders.len(), 1);
    assert_eq!(info.holders[0].mode, HoldMode::Write);
    assert_eq!(record_of(&info.holders[0].party).app, "reader-a");
    w.unlock().await.unwrap();
}

#[tokio::test]
async fn semaphores_show_free_and_taken_permits_and_who_took_them() {
    let redis = TestRedis::any();
    let client = named(&redis.url(), "permit-taker").await;
    let name = unique_name("inspect-sem");
    let sem = Semaphore::new(&client, &name).unwrap();
    assert!(sem.try_set_permits(5).await.unwrap());
    let taken = sem.acquire_many(2).await.unwrap();
    let info = client.inspect(&name).await.unwrap();
    assert_eq!(info.kind, Some(ObjectKind::Semaphore));
    let permits = info.permits.unwrap();
    assert_eq!((permits.available, permits.taken), (3, None));
    drop(taken);

    let name = unique_name("inspect-expirable");
    let sem = ExpirableSemaphore::new(&client, &name).unwrap();
    assert!(sem.try_set_permits(3).await.unwrap());
    let watched = sem.acquire().await.unwrap();
    let leased = sem
        .acquire_with(AcquireOptions::new().with_lease(Duration::from_secs(8)))
        .await
        .unwrap();
    let info = client.inspect(&name).await.unwrap();
    assert_eq!(info.kind, Some("expirable-semaphore".parse().unwrap()));
    let permits = info.permits.unwrap();
    assert_eq!((permits.available, permits.taken), (1, Some(2)));
    let by_id: BTreeMap<_, _> = permits.permits.iter().map(|p| (p.id.clone(), p)).collect();
    let fixed = by_id[leased.id()];
    assert!(fixed.lease_left.unwrap() <= Duration::from_secs(8));
    assert_eq!(record_of(&fixed.party).app, "permit-taker");
    assert_eq!(record_of(&by_id[watched.id()].party).id, client.id());

    // A waiter for more permits than are free holds the reservation, as a plain semaphore's
    // does: the taken permits beside the count still say which kind it is.
    let large = tokio::spawn({
        let sem = sem.clone();
        async move { sem.acquire_many(3).await }
    });
    let expirable: ObjectKind = "expirable-semaphore".parse().unwrap();
    let mut con = redis.connection();
    let intent = format!("{{{name}}}:intent");
    eventually(SOON, "the large waiter's reservation", || {
        let reserved: bool = redis::cmd("EXISTS").arg(&intent).query(&mut con).unwrap();
        async move { reserved }
    })
    .await;
    let info = client.inspect(&name).await.unwrap();
    assert_eq!(info.kind, Some(expirable));
    assert!(info.permits.unwrap().reserved_for.is_some());
    large.abort();
    let _ = large.await;

    // Taken permits outlive a deleted count: they are still told, as the expirable
    // semaphore's.
    let _: () = redis::cmd("DEL").arg(&name).query(&mut con).unwrap();
    let info = client.inspect(&name).await.unwrap();
    assert_eq!(info.kind, Some(expirable));
    assert_eq!(info.permits.unwrap().taken, Some(2));
    drop((watched, leased));
}

#[tokio::test]
async fn a_latch_shows_its_count_and_participants_and_a_rate_limiter_its_window() {
    let redis = TestRedis::any();
    let client = client(&redis.url()).await;
    let name = unique_name("inspect-latch");
    let latch = CountDownLatch::new(&client, &name).unwrap();
    assert!(latch.try_set_count(3).await.unwrap());
    let _ = latch.count_down_once("worker-2").await.unwrap();
    let _ = latch.count_down_once("worker-1").await.unwrap();
    let _ = latch.count_down_once("worker-1").await.unwrap();
    let info = client.inspect(&name).await.unwrap();
    assert_eq!(info.kind.map(ObjectKind::as_str), Some("latch"));
    let state = info.latch.unwrap();
    assert_eq!(state.count, 1);
    assert_eq!(state.participant_count, 2);
    assert_eq!(state.participants, ["worker-1", "worker-2"]);

    let name = unique_name("inspect-rate");
    let limiter = RateLimiter::new(&client, &name).unwrap();
    assert!(
        limiter
            .try_set_rate(RateType::Overall, 10, Duration::from_secs(60))
            .await
            .unwrap()
    );
    assert!(limiter.try_acquire(3).await.unwrap());
    assert!(limiter.try_acquire(2).await.unwrap());
    let info = client.inspect(&name).await.unwrap();
    // A kind its own crate teaches inspection (`ferrisson-rate-limiter`'s KindInspection).
    assert_eq!(info.kind.map(ObjectKind::as_str), Some("rate-limiter"));
    assert!(matches!(info.kind, Some(ObjectKind::Registered(_))));
    let rate = info.rate.unwrap();
    assert_eq!(
        (rate.rate, rate.interval, rate.per_client),
        (10, Duration::from_secs(60), false)
    );
    assert_eq!((rate.available, rate.given_in_window), (Some(5), 5));
    let back = rate.next_return_in.unwrap();
    // A permit comes back an interval after the end of the millisecond it was given in.
    assert!(
        back <= Duration::from_millis(60_001) && back > Duration::from_secs(50),
        "{back:?}"
    );
}

#[tokio::test]
async fn the_lean_mutex_shows_its_holder_and_token() {
    let redis = TestRedis::any();
    let client = named(&redis.url(), "mutex-app").await;
    let name = unique_name("inspect-mutex");
    let guard = Mutex::fenced(&client, &name).unwrap().lock().await.unwrap();
    let info = client.inspect(&name).await.unwrap();
    // A kind its own crate teaches inspection (`ferrisson-lock`'s KindInspection).
    assert_eq!(
        (info.kind.map(ObjectKind::as_str), info.kind_certain),
        (Some("mutex"), true)
    );
    assert_eq!(info.holders[0].owner, guard.owner().as_str());
    assert_eq!(record_of(&info.holders[0].party).app, "mutex-app");
    assert_eq!(info.fencing_token, guard.token());
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn nothing_and_foreign_data_read_as_such() {
    let redis = TestRedis::any();
    let client = client(&redis.url()).await;
    let mut con = redis.connection();
    let missing = client.inspect(&unique_name("inspect-none")).await.unwrap();
    assert_eq!(missing.kind, None);
    assert_eq!(missing.summary(), "nothing stored under this name");
    let foreign = unique_name("inspect-foreign");
    let _: () = redis::cmd("HSET")
        .arg(&foreign)
        .arg("user")
        .arg("ada")
        .query(&mut con)
        .unwrap();
    assert!(matches!(
        client.inspect(&foreign).await,
        Err(Error::WrongType { .. })
    ));
    let list = unique_name("inspect-list");
    let _: () = redis::cmd("RPUSH")
        .arg(&list)
        .arg("x")
        .query(&mut con)
        .unwrap();
    assert!(matches!(
        client.inspect(&list).await,
        Err(Error::WrongType { .. })
    ));
    let sem = unique_name("inspect-hint");
    let _: () = redis::cmd("SET").arg(&sem).arg(4).query(&mut con).unwrap();
    assert_eq!(
        client
            .inspect_as(&sem, "latch".parse().unwrap())
            .await
            .unwrap()
            .latch
            .unwrap()
            .count,
        4
    );
    assert!(matches!(
        client.inspect_as(&sem, ObjectKind::Lock).await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        client.inspect("").await,
        Err(Error::InvalidArgument(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspecting_and_listing_every_kind_changes_nothing() {
    let server = RedisServer::spawn();
    let url = server.url();
    let client = named(&url, "reader").await;
    let other = named(&url, "holder").await;
    let names = every_kind::KindNames::unique("still");
    let held = every_kind::EveryKind::hold(&other, &names).await;
    let limiter = RateLimiter::new(&other, "still-rate").unwrap();
    assert!(
        limiter
            .try_set_rate(RateType::Overall, 5, Duration::from_secs(60))
            .await
            .unwrap()
    );
    assert!(limiter.try_acquire(1).await.unwrap());
    let waiters = held.waiters(&other, &names);
    eventually(SOON, "a waiter per kind", || async {
        other.waiter_stats().1 >= every_kind::KindNames::KINDS
    })
    .await;
    // Renewals change only TTLs, which a dump leaves out; records and the fair lock's
    // timeouts and liveness deadlines (refreshed by its live waiter every few seconds) are
    // left out of the comparison.
    let mut con = server.connection();
    let before = snapshot(&mut con);
    for name in [
        &names.lock,
        &names.mutex,
        &names.fair,
        &names.rw,
        &names.semaphore,
        &names.expirable,
        &names.latch,
    ] {
        let info = client.inspect(name).await.unwrap();
        assert!(info.kind.is_some(), "{name}");
    }
    client.inspect("still-rate").await.unwrap();
    let listed: Vec<_> = client.list_objects("still*").collect().await;
    let after = snapshot(&mut con);
    for (key, (dump, expires)) in &before {
        let text = String::from_utf8_lossy(key);
        if text.starts_with("ferrisson_client:")
            || text.starts_with("redisson_lock_timeout:")
            || text.ends_with(":alive")
        {
            continue;
        }
        let Some((dump_after, expires_after)) = after.get(key) else {
            panic!("{} vanished", String::from_utf8_lossy(key));
        };
        assert_eq!(dump, dump_after, "{}", String::from_utf8_lossy(key));
        assert_eq!(expires, expires_after, "{}", String::from_utf8_lossy(key));
    }
    let mut kinds: Vec<String> = listed
        .into_iter()
        .map(|i| {
            let i = i.unwrap();
            format!("{}={}", i.name, i.kind.unwrap())
        })
        .collect();
    kinds.sort();
    let mut expected = vec![
        format!("{}=lock", names.lock),
        format!("{}=mutex", names.mutex),
        format!("{}=fair-lock", names.fair),
        format!("{}=rwlock", names.rw),
        format!("{}=semaphore", names.semaphore),
        format!("{}=expirable-semaphore", names.expirable),
        format!("{}=latch", names.latch),
        "still-rate=rate-limiter".to_owned(),
    ];
    expected.sort();
    assert_eq!(kinds, expected);
    held.release().await;
    for w in waiters {
        tokio::time::timeout(SOON, w).await.unwrap().unwrap();
    }
}

#[tokio::test]
async fn a_kind_named_for_nothing_stored_is_still_nothing() {
    let redis = TestRedis::any();
    let client = client(&redis.url()).await;
    let name = unique_name("inspect-nothing");
    for kind in ObjectKind::known() {
        let info = client.inspect_as(&name, kind).await.unwrap();
        assert_eq!(info.kind, None, "{kind}");
        assert!(info.holders.is_empty() && info.permits.is_none());
    }
}

#[tokio::test]
async fn a_namespaced_client_reads_and_lists_its_own_names() {
    let redis = TestRedis::any();
    let namespace = format!("{}:", unique_name("ns"));
    let client = Client::with_config(ClientConfig::new(redis.url()).with_namespace(&namespace))
        .await
        .unwrap();
    let outsider = self::client(&redis.url()).await;
    let guard = ReentrantLock::new(&client, "job")
        .unwrap()
        .lock()
        .await
        .unwrap();
    let info = client.inspect("job").await.unwrap();
    assert_eq!(
        (info.name.as_str(), info.key.clone()),
        ("job", format!("{namespace}job"))
    );
    assert_eq!(info.holders.len(), 1);
    let listed: Vec<String> = client
        .list_objects("*")
        .map(|i| i.unwrap().name)
        .collect()
        .await;
    assert_eq!(listed, ["job"]);
    // Without the namespace, the same object under its full key.
    let full = outsider.inspect(&format!("{namespace}job")).await.unwrap();
    assert_eq!(full.holders[0].owner, info.holders[0].owner);
    assert_eq!(record_of(&full.holders[0].party).id, client.id());
    guard.unlock().await.unwrap();
}
