//! The faster multi-lock (Redisson's `RFasterMultiLock`): values taken all or none in one hash,
//! written as Redisson writes them, a part of a hold unlocked while the rest is kept, wake-ups
//! only for a value a waiter wants, and a Redisson holder (played by the test, writing what
//! Redisson writes) and a ferrisson waiter waking each other. The conformance suite runs the
//! rest (exclusion, leases, loss, wrong types, dropped futures, owners).
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common;

use std::collections::HashMap;
use std::time::Duration;

use common::{
    TestRedis, client, client_with_lease, eventually, settled_command_calls, unique_name,
};
use ferrisson::{AcquireOptions, Error, FasterMultiLock, Lock, LossReason};
use ferrisson_faster_multilock::{MAX_VALUES, redisson_field};
use redis::Commands;

const SOON: Duration = Duration::from_secs(10);

fn subscribers(con: &mut redis::Connection, channel: &str) -> i64 {
    let n: Vec<(String, i64)> = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query(con)
        .unwrap();
    n.first().map_or(0, |(_, n)| *n)
}

fn server_ms(con: &mut redis::Connection) -> u64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(con).unwrap();
    s * 1000 + us / 1000
}

/// Fields as the reference C implementation of HighwayHash computes them under Redisson's key
/// (two words big-endian, base64, padding dropped): what `Hash.hash128toBase64` gives Redisson.
#[test]
fn a_value_s_field_is_redisson_s() {
    for (value, field) in [
        ("Jack_001", "7pNoDdizVy2xY792MaFv+w"),
        ("Mary_002", "kIX2DFOX4IWct7G7K6tV9A"),
        ("", "t6rZwibGo2uy1OSmNVe8pg"),
        ("a", "qwvAS12pR0CgRitaypEjUw"),
        ("ünïcode-€", "06gPi4CHGB4dmyFAKVTVFg"),
        (&"x".repeat(100), "xLlhhuMBl4Bc0rU9DXx5Mw"),
    ] {
        assert_eq!(redisson_field(value), field, "{value:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_is_written_as_redisson_writes_it_and_bad_input_is_refused() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    let mut con = redis.connection();
    let group = unique_name("fml-layout");
    let lock = FasterMultiLock::new(&a, &group, ["Jack_001", "Mary_002", "Jack_001"]).unwrap();
    let before = server_ms(&mut con);
    let guard = lock.lock().await.unwrap();
    let after = server_ms(&mut con);
    let owner = guard.owner().as_str().to_owned();
    let hash: HashMap<String, String> = con.hgetall(&group).unwrap();
    assert_eq!(hash.len(), 6, "{hash:?}");
    let lease = u64::try_from(a.config().lease().as_millis()).unwrap();
    for field in ["7pNoDdizVy2xY792MaFv+w", "kIX2DFOX4IWct7G7K6tV9A"] {
        assert_eq!(hash[field], owner);
        assert_eq!(hash[&format!("{field}:{owner}:lock_count")], "1");
        let expires: u64 = hash[&format!("{field}:{owner}:expire_time")]
            .parse()
            .unwrap();
        assert!(
            (before + lease..=after + lease).contains(&expires),
            "{expires}"
        );
    }
    let pttl: i64 = con.pttl(&group).unwrap();
    assert!(pttl > 0 && pttl <= i64::try_from(lease).unwrap(), "{pttl}");
    guard.unlock().await.unwrap();
    let exists: bool = con.exists(&group).unwrap();
    assert!(!exists, "the last value released deletes the hash");

    let too_many = (0..=MAX_VALUES).map(|i| i.to_string());
    for made in [
        FasterMultiLock::new(&a, &group, Vec::<String>::new()),
        FasterMultiLock::new(&a, &group, too_many),
        FasterMultiLock::new(&a, "", ["x"]),
    ] {
        assert!(matches!(made, Err(Error::InvalidArgument(_))), "{made:?}");
    }
    assert!(matches!(
        lock.part(["Jack_001", "nobody"]),
        Err(Error::InvalidArgument(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_are_taken_all_or_none() {
    let redis = TestRedis::any();
    let (a, b) = (client(&redis.url()).await, client(&redis.url()).await);
    let mut con = redis.connection();
    let group = unique_name("fml-all");
    let held = FasterMultiLock::new(&a, &group, ["1", "2"])
        .unwrap()
        .lock()
        .await
        .unwrap();
    let overlapping = FasterMultiLock::new(&b, &group, ["2", "3"]).unwrap();
    assert!(overlapping.try_lock().await.unwrap().is_none());
    let taken: bool = con.hexists(&group, redisson_field("3")).unwrap();
    assert!(!taken, "a value was taken though another was held");
    let disjoint = FasterMultiLock::new(&b, &group, ["3", "4"]).unwrap();
    let other = disjoint
        .try_lock()
        .await
        .unwrap()
        .expect("other values are free");
    assert!(overlapping.is_locked().await.unwrap());
    let waiter = tokio::spawn({
        let overlapping = overlapping.clone();
        async move {
            overlapping
                .try_lock_with(AcquireOptions::new().with_wait(SOON))
                .await
        }
    });
    // "3" is still held by `other`: the release of "1" and "2" is not enough.
    held.unlock().await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiter.is_finished(), "taken while a value was held");
    other.unlock().await.unwrap();
    let guard = waiter.await.unwrap().unwrap().expect("every value free");
    guard.unlock().await.unwrap();
}

/// A waiter for one value sleeps through the release of another value of its group (no try:
/// no script call of its own), and wakes for the release of its value, long before its
/// re-check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_wakes_for_a_value_it_wants_and_for_no_other() {
    let server = ferrisson_testkit::RedisServer::spawn();
    let (x, y, w) = (
        client(&server.url()).await,
        client(&server.url()).await,
        client(&server.url()).await,
    );
    let mut con = server.connection();
    let group = unique_name("fml-wake");
    let fixed = AcquireOptions::new().with_lease(Duration::from_secs(60));
    let lock = |c, v: &str| FasterMultiLock::new(c, &group, [v]).unwrap();
    let held_a = lock(&x, "a").lock_with(fixed).await.unwrap();
    let held_b = lock(&y, "b").lock_with(fixed).await.unwrap();
    let wanted = lock(&w, "a");
    let waiter = tokio::spawn(async move {
        wanted
            .try_lock_with(AcquireOptions::new().with_wait(Duration::from_secs(50)))
            .await
    });
    let channel = format!("redisson_lock__channel:{{{group}}}");
    eventually(SOON, "the waiter subscribed", || async {
        subscribers(&mut server.connection(), &channel) > 0
    })
    .await;
    let before = settled_command_calls(&mut con).await;
    held_b.unlock().await.unwrap();
    let after = settled_command_calls(&mut con).await;
    let calls = |m: &HashMap<String, u64>| m.get("evalsha").copied().unwrap_or(0);
    assert_eq!(
        calls(&after) - calls(&before),
        1,
        "only the release ran: the waiter did not try"
    );
    assert!(!waiter.is_finished(), "the waiter woke for another value");
    held_a.unlock().await.unwrap();
    let guard = tokio::time::timeout(SOON, waiter)
        .await
        .expect("the release of its value woke the waiter")
        .unwrap()
        .unwrap()
        .unwrap();
    guard.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_part_of_a_hold_is_unlocked_and_the_rest_kept() {
    let redis = TestRedis::any();
    let lease = Duration::from_millis(900);
    let a = client_with_lease(&redis.url(), lease).await;
    let b = client(&redis.url()).await;
    let group = unique_name("fml-part");
    let lock = FasterMultiLock::new(&a, &group, ["1", "2", "3"]).unwrap();
    let other = |v: &[&str]| FasterMultiLock::new(&b, &group, v.to_vec()).unwrap();
    let guard = lock.lock().await.unwrap();
    let part = lock.part(["1"]).unwrap();
    let rest = part.unlock(guard).await.unwrap().unwrap();
    other(&["1"])
        .try_lock()
        .await
        .unwrap()
        .expect("1 was unlocked")
        .unlock()
        .await
        .unwrap();
    // The values kept stay held through several leases: the watchdog renews them.
    tokio::time::sleep(lease * 3).await;
    assert!(rest.ensure_held().is_ok(), "{:?}", rest.loss_reason());
    assert!(other(&["2"]).try_lock().await.unwrap().is_none());
    assert!(other(&["3"]).try_lock().await.unwrap().is_none());
    // The values kept are the part's `rest`: unlocking all of them gives no guard back.
    assert!(
        part.rest()
            .unwrap()
            .part(["2", "3"])
            .unwrap()
            .unlock(rest)
            .await
            .unwrap()
            .is_none()
    );
    other(&["1", "2", "3"])
        .try_lock()
        .await
        .unwrap()
        .expect("all free")
        .unlock()
        .await
        .unwrap();

    // A fixed lease: the values kept keep its end.
    let guard = lock
        .lock_with(AcquireOptions::new().with_lease(Duration::from_secs(20)))
        .await
        .unwrap();
    let deadline = guard.lease_deadline().unwrap();
    let rest = lock
        .part(["3"])
        .unwrap()
        .unlock(guard)
        .await
        .unwrap()
        .unwrap();
    let kept = rest.lease_deadline().unwrap();
    assert!(kept <= deadline && kept + Duration::from_millis(50) >= deadline);
    assert!(other(&["3"]).try_lock().await.unwrap().is_some());
    rest.unlock().await.unwrap();

    // The rest of a bound lock's part is bound to the same owner.
    let owner = a.new_owner();
    let part = lock.owned_by(owner.clone()).part(["1"]).unwrap();
    assert_eq!(part.rest().unwrap().owner(), Some(&owner));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_taken_away_is_told_to_its_holder() {
    let redis = TestRedis::any();
    let a = client_with_lease(&redis.url(), Duration::from_secs(1)).await;
    let b = client(&redis.url()).await;
    let group = unique_name("fml-lost");
    let guard = FasterMultiLock::new(&a, &group, ["1", "2"])
        .unwrap()
        .lock()
        .await
        .unwrap();
    let one = FasterMultiLock::new(&b, &group, ["2"]).unwrap();
    assert!(one.force_unlock().await.unwrap());
    let reason = tokio::time::timeout(SOON, guard.lost())
        .await
        .expect("told");
    assert_eq!(reason, LossReason::NotHeld);
    assert!(matches!(guard.unlock().await, Err(Error::LeaseLost(_))));
}

/// Redisson's side, as it writes it: its hold blocks a ferrisson waiter, and its unlock (the
/// fields deleted, `0` published) wakes it; a ferrisson unlock publishes `1` first, which wakes
/// every Redisson waiter of the group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redisson_holder_and_a_ferrisson_waiter_wake_each_other() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    let mut con = redis.connection();
    let group = unique_name("fml-redisson");
    let channel = format!("redisson_lock__channel:{{{group}}}");
    let (java, field) = (
        "5e8f0c1a-9d3e-4a57-8a4e-2f7f1b3c9d10:57",
        redisson_field("seat-7"),
    );
    let expires = server_ms(&mut con) + 30_000;
    let _: () = redis::pipe()
        .hset(&group, &field, java)
        .hset(&group, format!("{field}:{java}:expire_time"), expires)
        .hset(&group, format!("{field}:{java}:lock_count"), 1)
        .pexpire(&group, 30_000)
        .query(&mut con)
        .unwrap();
    let lock = FasterMultiLock::new(&a, &group, ["seat-7", "seat-8"]).unwrap();
    assert!(
        lock.try_lock().await.unwrap().is_none(),
        "Redisson holds seat-7"
    );
    let waiter = tokio::spawn({
        let lock = lock.clone();
        async move {
            lock.try_lock_with(AcquireOptions::new().with_wait(Duration::from_secs(25)))
                .await
        }
    });
    eventually(SOON, "the waiter subscribed", || async {
        let n: Vec<(String, i64)> = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(&channel)
            .query(&mut redis.connection())
            .unwrap();
        n.first().is_some_and(|(_, n)| *n > 0)
    })
    .await;
    let _: () = redis::pipe()
        .hdel(
            &group,
            &[
                field.clone(),
                format!("{field}:{java}:expire_time"),
                format!("{field}:{java}:lock_count"),
            ],
        )
        .publish(&channel, "0")
        .query(&mut con)
        .unwrap();
    let guard = tokio::time::timeout(SOON, waiter)
        .await
        .expect("woken")
        .unwrap()
        .unwrap()
        .unwrap();

    let mut listener = redis.connection();
    let mut pubsub = listener.as_pubsub();
    pubsub.subscribe(&channel).unwrap();
    pubsub.set_read_timeout(Some(SOON)).unwrap();
    guard.unlock().await.unwrap();
    let first: String = pubsub.get_message().unwrap().get_payload().unwrap();
    assert_eq!(first, "1", "Redisson's waiters all wake");
    let mask: u64 = pubsub
        .get_message()
        .unwrap()
        .get_payload::<String>()
        .unwrap()
        .parse()
        .unwrap();
    assert!(mask >= 1 << 52, "a number Redisson ignores: {mask}");
}

/// `Client::inspect` learns the kind from its crate: each holder with the values it holds, and
/// each value held as a detail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_is_inspected_with_its_holders_and_values() {
    let redis = TestRedis::any();
    let (a, b) = (client(&redis.url()).await, client(&redis.url()).await);
    let group = unique_name("fml-inspect");
    let first = FasterMultiLock::new(&a, &group, ["1", "2"])
        .unwrap()
        .lock()
        .await
        .unwrap();
    let second = FasterMultiLock::new(&b, &group, ["3"])
        .unwrap()
        .lock()
        .await
        .unwrap();
    let info = a.inspect(&group).await.unwrap();
    assert_eq!(info.kind.map(|k| k.as_str()), Some("faster-multilock"));
    let holders: Vec<(&str, u64)> = info
        .holders
        .iter()
        .map(|h| (h.owner.as_str(), h.count))
        .collect();
    let mut expected = vec![(first.owner().as_str(), 2), (second.owner().as_str(), 1)];
    expected.sort();
    assert_eq!(holders, expected);
    assert!(info.holders.iter().all(|h| h.lease_left.is_some()));
    assert_eq!(
        info.details.first(),
        Some(&("values held".to_owned(), "3".to_owned()))
    );
    let field = format!("value {}", redisson_field("3"));
    let detail = info
        .details
        .iter()
        .find(|(label, _)| *label == field)
        .unwrap();
    assert!(detail.1.starts_with(second.owner().as_str()), "{detail:?}");
    // The command-line tool's force unlock frees every value of the group.
    assert!(
        FasterMultiLock::force_unlock_group(&a, &group)
            .await
            .unwrap()
    );
    assert!(matches!(
        first.unlock().await,
        Err(Error::NotOwner(_) | Error::LeaseLost(_))
    ));
    drop(second);
}

/// A value is held through the millisecond its `expire_time` names: the scripts' clock is the
/// server's floored to whole ms, up to 1 ms behind the true time, and a value freed at its
/// `expire_time` could go up to 1 ms before the end of the lease the holder counts. Checked in
/// one transaction: the value's end set to the server's current ms, the acquire, the clock
/// again; whenever both clock reads name the same ms, the acquire must have found it held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_is_held_through_the_millisecond_its_lease_ends() {
    let redis = TestRedis::any();
    let mut con = redis.connection();
    let group = unique_name("fml-ms");
    let (holder, field) = ("redisson-like:1", redisson_field("v"));
    let acquire = ferrisson_faster_multilock::scripts()
        .into_iter()
        .find(|s| s.name() == "faster_multilock/acquire")
        .unwrap();
    let now_ms = "local t = redis.call('time') return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)";
    let set_end = "local t = redis.call('time') local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) \
         redis.call('hset', KEYS[1], ARGV[1], ARGV[2], ARGV[1] .. ':' .. ARGV[2] .. ':expire_time', \
         string.format('%d', ms), ARGV[1] .. ':' .. ARGV[2] .. ':lock_count', 1) \
         redis.call('pexpire', KEYS[1], 60000) return ms";
    let mut same_ms = 0;
    for _ in 0..200 {
        let (set, reply, after): (i64, redis::Value, i64) = redis::pipe()
            .atomic()
            .cmd("EVAL")
            .arg(set_end)
            .arg(1)
            .arg(&group)
            .arg(&field)
            .arg(holder)
            .cmd("EVAL")
            .arg(acquire.source())
            .arg(2)
            .arg(&group)
            .arg(format!("{{{group}}}:undone:test"))
            .arg(30_000)
            .arg("")
            .arg(1)
            .arg("ferrisson:1")
            .arg(&field)
            .cmd("EVAL")
            .arg(now_ms)
            .arg(0)
            .query(&mut con)
            .unwrap();
        if set == after {
            same_ms += 1;
            let busy: Vec<i64> = redis::from_redis_value(reply).unwrap();
            assert_eq!(busy, vec![0, 1], "taken in the millisecond its lease ends");
        }
        let _: () = con.del(&group).unwrap();
        if same_ms >= 5 {
            return;
        }
    }
    panic!("no transaction ran within one millisecond ({same_ms} of 200)");
}
