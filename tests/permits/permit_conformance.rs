//! What both semaphores promise, tested once by a suite generic over the permit kinds: the
//! semaphore and the permit-expirable semaphore run the same checks through a small adapter.
//! Kind-specific behaviour (leases and ids, reservations, hand-offs) stays in each kind's file.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common;

use std::future::Future;
use std::time::Duration;

use common::{TestRedis, client, eventually, unique_name};
use ferrisson::{AcquireOptions, Client, Error, Result};
use ferrisson_expirable_semaphore::{ExpirableSemaphore, Permit};
use ferrisson_semaphore::{Permits, Semaphore};
use redis::Commands;

const SOON: Duration = Duration::from_secs(10);

/// A permit kind under test: one permit at a time, as a guard that gives it back on drop.
trait Kind: Clone + Send + Sync + 'static {
    type Guard: Send + 'static;
    const NAME: &'static str;
    fn make(client: &Client, name: &str) -> Self;
    fn set(&self, n: u32) -> impl Future<Output = Result<bool>> + Send;
    fn take(&self) -> impl Future<Output = Result<Self::Guard>> + Send;
    fn try_take(&self, wait: Duration) -> impl Future<Output = Result<Option<Self::Guard>>> + Send;
    fn give(guard: Self::Guard) -> impl Future<Output = Result<()>> + Send;
    fn available(&self) -> impl Future<Output = Result<i64>> + Send;
}

impl Kind for Semaphore {
    type Guard = Permits;
    const NAME: &'static str = "semaphore";
    fn make(client: &Client, name: &str) -> Self {
        Semaphore::new(client, name).unwrap()
    }
    fn set(&self, n: u32) -> impl Future<Output = Result<bool>> + Send {
        self.try_set_permits(n)
    }
    fn take(&self) -> impl Future<Output = Result<Permits>> + Send {
        self.acquire()
    }
    fn try_take(&self, wait: Duration) -> impl Future<Output = Result<Option<Permits>>> + Send {
        self.try_acquire_with(AcquireOptions::new().with_wait(wait))
    }
    fn give(guard: Permits) -> impl Future<Output = Result<()>> + Send {
        guard.release()
    }
    fn available(&self) -> impl Future<Output = Result<i64>> + Send {
        self.available_permits()
    }
}

impl Kind for ExpirableSemaphore {
    type Guard = Permit;
    const NAME: &'static str = "expirable semaphore";
    fn make(client: &Client, name: &str) -> Self {
        ExpirableSemaphore::new(client, name).unwrap()
    }
    fn set(&self, n: u32) -> impl Future<Output = Result<bool>> + Send {
        self.try_set_permits(n)
    }
    fn take(&self) -> impl Future<Output = Result<Permit>> + Send {
        self.acquire()
    }
    fn try_take(&self, wait: Duration) -> impl Future<Output = Result<Option<Permit>>> + Send {
        self.try_acquire_with(AcquireOptions::new().with_wait(wait))
    }
    fn give(guard: Permit) -> impl Future<Output = Result<()>> + Send {
        guard.release()
    }
    fn available(&self) -> impl Future<Output = Result<i64>> + Send {
        self.available_permits()
    }
}

/// N permits go to N takers; the next waits, and gets in when one comes back.
async fn counts_limit_and_wake<K: Kind>() {
    let redis = TestRedis::any();
    let (a, b) = (client(&redis.url()).await, client(&redis.url()).await);
    let name = unique_name("pconf-limit");
    let (on_a, on_b) = (K::make(&a, &name), K::make(&b, &name));
    assert!(on_a.set(2).await.unwrap());
    assert!(!on_b.set(5).await.unwrap(), "{}: set once", K::NAME);
    let first = on_a.take().await.unwrap();
    let second = on_b.take().await.unwrap();
    assert_eq!(on_a.available().await.unwrap(), 0);
    assert!(
        on_b.try_take(Duration::ZERO).await.unwrap().is_none(),
        "{}: none left",
        K::NAME
    );
    assert!(
        on_b.try_take(Duration::from_millis(100))
            .await
            .unwrap()
            .is_none(),
        "{}: the wait limit passes",
        K::NAME
    );
    let waiter = tokio::spawn({
        let on_b = on_b.clone();
        async move { on_b.try_take(SOON).await }
    });
    K::give(first).await.unwrap();
    let third = tokio::time::timeout(SOON, waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap()
        .expect("woken by the release");
    K::give(second).await.unwrap();
    // Dropped, a guard gives its permit back by itself.
    drop(third);
    eventually(SOON, "every permit back", || async {
        on_a.available().await.unwrap() == 2
    })
    .await;
}

/// Given a TTL, then used (a permit taken and given back, one kept): every key the object
/// made has a TTL, so that it all goes together (Redisson's acquire carries the count's TTL
/// onto the keys it makes).
async fn an_expiry_covers_every_key_use_makes<K: Kind + ferrisson::SyncObject>() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    let name = unique_name("pconf-ttl");
    let on_a = K::make(&a, &name);
    assert!(on_a.set(3).await.unwrap());
    assert!(on_a.expire(Duration::from_secs(60)).await.unwrap());
    K::give(on_a.take().await.unwrap()).await.unwrap();
    let kept = on_a.take().await.unwrap();
    let lasting = common::lasting_keys(&mut redis.connection(), &format!("*{name}*"));
    assert!(
        lasting.is_empty(),
        "{}: keys left without a TTL: {lasting:?}",
        K::NAME
    );
    K::give(kept).await.unwrap();
}

/// Acquire futures dropped at every stage leave every permit in place.
async fn dropped_futures_leak_nothing<K: Kind>() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    let kind = K::make(&a, &unique_name("pconf-dropped"));
    kind.set(1).await.unwrap();
    for i in 0..40u64 {
        let held = if i % 2 == 0 {
            Some(kind.take().await.unwrap())
        } else {
            None
        };
        let _ = tokio::time::timeout(Duration::from_micros(50 * i), kind.take()).await;
        if let Some(held) = held {
            K::give(held).await.unwrap();
        }
    }
    eventually(SOON, "the permit back", || async {
        kind.available().await.unwrap() == 1
    })
    .await;
}

/// A key of another type is a clear error and stays as it was.
async fn wrong_types<K: Kind>() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    let name = unique_name("pconf-list");
    let mut con = redis.connection();
    let _: () = con.rpush(&name, "not a count").unwrap();
    let kind = K::make(&a, &name);
    for err in [
        kind.try_take(Duration::ZERO).await.map(drop).unwrap_err(),
        kind.set(1).await.map(drop).unwrap_err(),
    ] {
        assert!(
            matches!(err, Error::WrongType { .. }),
            "{}: {err:?}",
            K::NAME
        );
    }
    let len: usize = con.llen(&name).unwrap();
    assert_eq!(len, 1);
}

macro_rules! conformance {
    ($($kind:ty => $module:ident),* $(,)?) => {$(
        mod $module {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn counts_limit_and_wake() {
                super::counts_limit_and_wake::<$kind>().await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn an_expiry_covers_every_key_use_makes() {
                super::an_expiry_covers_every_key_use_makes::<$kind>().await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn dropped_futures_leak_nothing() {
                super::dropped_futures_leak_nothing::<$kind>().await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn wrong_types() {
                super::wrong_types::<$kind>().await;
            }
        }
    )*};
}

conformance!(Semaphore => semaphore, ExpirableSemaphore => expirable_semaphore);

/// The client id the script-level tests below play.
const CLIENT: &str = "0123456789abcdef0123456789abcdef";

/// The sequence number of the try [`expirable_try_of_two`] makes.
const TRY_SEQ: u64 = 7;

/// The ids of the two permits of a try whose id seed is `seed`: the seed itself, then the
/// seed with its last four bytes, as a big-endian number, one higher (what
/// `expirable_semaphore/acquire` makes of a seed).
fn seeded_ids(seed: u128) -> [[u8; 16]; 2] {
    let low = u32::try_from(seed & 0xffff_ffff).unwrap().wrapping_add(1);
    [
        seed.to_be_bytes(),
        ((seed & !0xffff_ffff) | u128::from(low)).to_be_bytes(),
    ]
}

/// One try of a fixed waiter for 2 permits of the permit-expirable semaphore `name`, whose ids
/// come from `seed`, with a 30 s lease and no reservation: `expirable_semaphore/acquire` as
/// the client sends it.
fn expirable_try_of_two(name: &str, seed: u128, resend: bool) -> redis::Cmd {
    let scripts = ferrisson_expirable_semaphore::scripts();
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(source(&scripts, "expirable_semaphore/acquire"))
        .arg(1)
        .arg(name)
        .arg(2)
        .arg(30_000)
        .arg("publish")
        .arg(&seed.to_be_bytes()[..])
        .arg(CLIENT)
        .arg(TRY_SEQ)
        .arg(if resend { "r" } else { "" });
    cmd
}

/// The source of the script named `name` among `scripts`.
fn source(scripts: &[&'static ferrisson_core::__engine::Script], name: &str) -> String {
    scripts
        .iter()
        .find(|s| s.name() == name)
        .unwrap_or_else(|| panic!("no script {name}"))
        .source()
        .to_owned()
}

/// An abandoned try's undo that reaches Redis before the try itself (calls can arrive out of
/// order: one resent with `EVAL` after `NOSCRIPT` runs after the calls sent behind it, the
/// undo among them) leaves the try nothing to take: before, the try then took a permit nobody
/// held, lost to the semaphore for good (the plain semaphore's permits have no lease). Run
/// at the scripts, in that order, for both kinds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_try_that_arrives_after_its_undo_takes_nothing() {
    let redis = TestRedis::any();
    let mut con = redis.connection();
    // A permit id as the expirable semaphore's scripts take it: 16 raw bytes.
    let id = 0xfedc_ba98_7654_3210_fedc_ba98_7654_3210_u128.to_be_bytes();

    let name = unique_name("pconf-undo-first");
    let plain = ferrisson_semaphore::scripts();
    let _: () = con.set(&name, 1).unwrap();
    let undone: i64 = redis::cmd("EVAL")
        .arg(source(&plain, "semaphore/undo_acquire"))
        .arg(1)
        .arg(&name)
        .arg(1)
        .arg("publish")
        .arg(CLIENT)
        .arg(0)
        .arg(TRY_SEQ)
        .arg("e10000")
        .query(&mut con)
        .unwrap();
    assert_eq!(undone, 0, "nothing taken yet");
    let reply: Vec<i64> = redis::cmd("EVAL")
        .arg(source(&plain, "semaphore/acquire"))
        .arg(1)
        .arg(&name)
        .arg(1)
        .arg(CLIENT)
        .arg(0)
        .arg(TRY_SEQ)
        .arg("")
        .query(&mut con)
        .unwrap();
    assert_eq!(
        reply[0], 0,
        "semaphore: the late try took a permit: {reply:?}"
    );
    let left: i64 = con.get(&name).unwrap();
    assert_eq!(left, 1, "semaphore: the permit stays free");

    let name = unique_name("pconf-undo-first-exp");
    let expirable = ferrisson_expirable_semaphore::scripts();
    let _: () = con.set(&name, 1).unwrap();
    let undone: i64 = redis::cmd("EVAL")
        .arg(source(&expirable, "expirable_semaphore/undo_acquire"))
        .arg(1)
        .arg(&name)
        .arg("publish")
        .arg(&id[..])
        .arg(1)
        .arg(CLIENT)
        .arg(0)
        .arg(TRY_SEQ)
        .arg("e10000")
        .query(&mut con)
        .unwrap();
    assert_eq!(undone, 0, "nothing taken yet");
    let reply: Vec<i64> = redis::cmd("EVAL")
        .arg(source(&expirable, "expirable_semaphore/acquire"))
        .arg(1)
        .arg(&name)
        .arg(1)
        .arg(30_000)
        .arg("publish")
        .arg(&id[..])
        .arg(CLIENT)
        .arg(TRY_SEQ)
        .arg("")
        .query(&mut con)
        .unwrap();
    assert_eq!(
        reply[0], 0,
        "expirable semaphore: the late try took a permit: {reply:?}"
    );
    let left: i64 = con.get(&name).unwrap();
    assert_eq!(left, 1, "expirable semaphore: the permit stays free");
    let taken: i64 = con.zcard(format!("{{{name}}}:timeout")).unwrap();
    assert_eq!(taken, 0, "expirable semaphore: no permit id recorded");
}

/// The expirable semaphore's hand-off counts once without a latch: a retry (its reply lost)
/// finds the successor's new id taken and answers "handed over" without a second change; a
/// plain call for a permit no longer held changes nothing. Ids are 16 raw bytes, the layout's
/// form, which Redisson reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_off_resent_after_a_lost_reply_counts_once() {
    let redis = TestRedis::any();
    let mut con = redis.connection();
    let name = unique_name("pconf-handoff");
    let timeouts = format!("{{{name}}}:timeout");
    let released = 0x0011_2233_4455_6677_8899_aabb_ccdd_eeff_u128.to_be_bytes();
    let successor = 0xffee_ddcc_bbaa_9988_7766_5544_3322_1100_u128.to_be_bytes();
    let scripts = ferrisson_expirable_semaphore::scripts();
    let hand_off = source(&scripts, "expirable_semaphore/hand_off");
    let _: () = redis::cmd("ZADD")
        .arg(&timeouts)
        .arg(922_337_203_685_477_i64)
        .arg(&released[..])
        .query(&mut con)
        .unwrap();
    let call = |retry: &str| {
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(&hand_off)
            .arg(1)
            .arg(&timeouts)
            .arg(&released[..])
            .arg(&successor[..])
            .arg(30_000)
            .arg(retry);
        cmd
    };
    let first: i64 = call("0").query(&mut con).unwrap();
    assert_eq!(first, 1, "handed over");
    let members: Vec<Vec<u8>> = con.zrange(&timeouts, 0, -1).unwrap();
    assert_eq!(
        members,
        vec![successor.to_vec()],
        "the successor holds it, once"
    );
    let resent: i64 = call("1").query(&mut con).unwrap();
    assert_eq!(resent, 1, "the resend learns the lost call handed it over");
    let again: i64 = call("0").query(&mut con).unwrap();
    assert_eq!(again, 0, "a released permit is not handed over twice");
    let members: Vec<Vec<u8>> = con.zrange(&timeouts, 0, -1).unwrap();
    assert_eq!(members, vec![successor.to_vec()], "nothing else changed");
}

/// An expirable-semaphore try resent after its lost call's permits have expired (a lease
/// shorter than the retry window) is never answered "taken" for permits no longer held: the
/// expired ones go back to the count and the resend takes live ones under the same ids.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expirable_try_resent_after_its_permits_expired_takes_live_ones() {
    let redis = TestRedis::any();
    let mut con = redis.connection();
    let name = unique_name("pconf-exp-expired");
    let timeouts = format!("{{{name}}}:timeout");
    let seed = 0x0303_0303_0303_0303_0303_0303_0303_0303_u128;
    let ids = seeded_ids(seed);
    let _: () = con.set(&name, 3).unwrap();
    let try_call = |resend| expirable_try_of_two(&name, seed, resend);
    let first: i64 = try_call(false).query(&mut con).unwrap();
    assert_eq!(first, 1, "taken, one left (the taken try's integer reply)");
    // The lost call's permits expire before the resend arrives.
    for id in &ids {
        let _: i64 = redis::cmd("ZADD")
            .arg(&timeouts)
            .arg("XX")
            .arg(1)
            .arg(&id[..])
            .query(&mut con)
            .unwrap();
    }
    let resent: i64 = try_call(true).query(&mut con).unwrap();
    assert_eq!(resent, 1, "taken anew");
    let (secs, _): (u64, u64) = redis::cmd("TIME").query(&mut con).unwrap();
    for id in &ids {
        let expiry: f64 = con.zscore(&timeouts, &id[..]).unwrap();
        assert!(
            expiry > (secs * 1000) as f64,
            "the resend's permits are live (expiry {expiry}, now {secs} s)"
        );
    }
    let left: i64 = con.get(&name).unwrap();
    assert_eq!(
        left, 1,
        "the expired permits went back before the new ones were taken"
    );
    let taken: i64 = con.zcard(&timeouts).unwrap();
    assert_eq!(taken, 2);
}

/// An expirable-semaphore try resent after a lost reply takes its permits once, with no latch
/// written on the way: the resend finds the try's own (fresh) ids taken and answers "taken"
/// without counting again. Its undo then gives them back, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expirable_try_resent_after_a_lost_reply_takes_once() {
    let redis = TestRedis::any();
    let mut con = redis.connection();
    let name = unique_name("pconf-exp-resent");
    let timeouts = format!("{{{name}}}:timeout");
    let seed = 0x0101_0101_0101_0101_0101_0101_ffff_ffff_u128;
    let ids = seeded_ids(seed);
    assert_eq!(
        ids[1],
        0x0101_0101_0101_0101_0101_0101_0000_0000_u128.to_be_bytes(),
        "the ids' last four bytes wrap within the seed's prefix"
    );
    let scripts = ferrisson_expirable_semaphore::scripts();
    let _: () = con.set(&name, 3).unwrap();
    let try_call = |resend| expirable_try_of_two(&name, seed, resend);
    let first: i64 = try_call(false).query(&mut con).unwrap();
    assert_eq!(first, 1, "taken, one left (the taken try's integer reply)");
    let keys: Vec<String> = con.keys(format!("*{name}*")).unwrap();
    let mut keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    keys.sort_unstable();
    let mut expected = vec![name.as_str(), timeouts.as_str()];
    expected.sort_unstable();
    assert_eq!(
        keys, expected,
        "nothing written but the count and the permits"
    );
    let resent: Vec<i64> = try_call(true).query(&mut con).unwrap();
    assert_eq!(resent[0], 1, "the resend learns its lost call took them");
    let left: i64 = con.get(&name).unwrap();
    assert_eq!(left, 1, "counted once");
    let taken: i64 = con.zcard(&timeouts).unwrap();
    assert_eq!(taken, 2);

    let undo = || {
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(source(&scripts, "expirable_semaphore/undo_acquire"))
            .arg(1)
            .arg(&name)
            .arg("publish")
            .arg(&seed.to_be_bytes()[..])
            .arg(2)
            .arg(CLIENT)
            .arg(0)
            .arg(TRY_SEQ)
            .arg("e10000");
        cmd
    };
    let members: Vec<Vec<u8>> = con.zrange(&timeouts, 0, -1).unwrap();
    let mut expected: Vec<Vec<u8>> = ids.iter().map(|id| id.to_vec()).collect();
    expected.sort();
    assert_eq!(members, expected, "the permits are the seed's ids");
    let given_back: i64 = undo().query(&mut con).unwrap();
    assert_eq!(given_back, 2);
    let again: i64 = undo().query(&mut con).unwrap();
    assert_eq!(again, 0, "once");
    let late: Vec<i64> = try_call(true).query(&mut con).unwrap();
    assert_eq!(late[0], 0, "an undone try takes nothing, even resent");
    let left: i64 = con.get(&name).unwrap();
    assert_eq!(left, 3, "every permit back");
}
