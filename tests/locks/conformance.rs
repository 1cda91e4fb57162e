//! What every lock kind promises, tested once by a suite generic over [`Lock`]: the reentrant
//! lock, the fair lock, the spin lock and the write side of the read-write lock run the same
//! checks, and so do the non-reentrant locks (all but the owner checks, which re-enter); the
//! read side the owner checks; the lean mutex (neither reentrant nor fenced yet) those that do
//! not need either.
//! Kind-specific behaviour (FIFO order, readers sharing, local hand-offs) stays in each kind's
//! own test file.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common;

use ferrisson::SyncObject;
use std::time::Duration;

use common::{
    TestRedis, client, client_with_lease, drop_calls_at_every_stage, eventually, unique_name,
};
use ferrisson::{AcquireOptions, Client, Error, Lock, LossReason, Owner, ReentrantLock};
use ferrisson_fair_lock::FairLock;
use ferrisson_rwlock::{ReadLock, ReadWriteLock, WriteLock};
use ferrisson_spin_lock::SpinLock;
use redis::Commands;

const SOON: Duration = Duration::from_secs(10);

/// A lock kind under test: how to make a handle.
trait Kind {
    type L: Lock + Clone + 'static;
    const NAME: &'static str;
    fn make(client: &Client, name: &str) -> Self::L;
    fn owned_by(lock: &Self::L, owner: Owner) -> Self::L;
}

/// A lock kind that hands out fencing tokens when asked.
trait Fenced: Kind {
    fn fenced(client: &Client, name: &str) -> Self::L;
}

struct Reentrant;
impl Kind for Reentrant {
    type L = ReentrantLock;
    const NAME: &'static str = "reentrant lock";
    fn make(client: &Client, name: &str) -> ReentrantLock {
        ReentrantLock::new(client, name).unwrap()
    }
    fn owned_by(lock: &ReentrantLock, owner: Owner) -> ReentrantLock {
        lock.owned_by(owner)
    }
}
impl Fenced for Reentrant {
    fn fenced(client: &Client, name: &str) -> ReentrantLock {
        ReentrantLock::fenced(client, name).unwrap()
    }
}

struct Fair;
impl Kind for Fair {
    type L = FairLock;
    const NAME: &'static str = "fair lock";
    fn make(client: &Client, name: &str) -> FairLock {
        FairLock::new(client, name).unwrap()
    }
    fn owned_by(lock: &FairLock, owner: Owner) -> FairLock {
        lock.owned_by(owner)
    }
}
impl Fenced for Fair {
    fn fenced(client: &Client, name: &str) -> FairLock {
        FairLock::fenced(client, name).unwrap()
    }
}

struct Write;
impl Kind for Write {
    type L = WriteLock;
    const NAME: &'static str = "write lock";
    fn make(client: &Client, name: &str) -> WriteLock {
        ReadWriteLock::new(client, name).unwrap().write_lock()
    }
    fn owned_by(lock: &WriteLock, owner: Owner) -> WriteLock {
        lock.owned_by(owner)
    }
}
impl Fenced for Write {
    fn fenced(client: &Client, name: &str) -> WriteLock {
        ReadWriteLock::fenced(client, name).unwrap().write_lock()
    }
}

struct Spin;
impl Kind for Spin {
    type L = SpinLock;
    const NAME: &'static str = "spin lock";
    fn make(client: &Client, name: &str) -> SpinLock {
        SpinLock::new(client, name).unwrap()
    }
    fn owned_by(lock: &SpinLock, owner: Owner) -> SpinLock {
        lock.owned_by(owner)
    }
}
impl Fenced for Spin {
    fn fenced(client: &Client, name: &str) -> SpinLock {
        SpinLock::fenced(client, name).unwrap()
    }
}

struct NonReentrant;
impl Kind for NonReentrant {
    type L = ferrisson::NonReentrantLock;
    const NAME: &'static str = "non-reentrant lock";
    fn make(client: &Client, name: &str) -> Self::L {
        ferrisson::NonReentrantLock::new(client, name).unwrap()
    }
    fn owned_by(lock: &Self::L, owner: Owner) -> Self::L {
        lock.owned_by(owner)
    }
}
impl Fenced for NonReentrant {
    fn fenced(client: &Client, name: &str) -> Self::L {
        ferrisson::NonReentrantLock::fenced(client, name).unwrap()
    }
}

struct NonReentrantFair;
impl Kind for NonReentrantFair {
    type L = ferrisson::NonReentrantFairLock;
    const NAME: &'static str = "non-reentrant fair lock";
    fn make(client: &Client, name: &str) -> Self::L {
        ferrisson::NonReentrantFairLock::new(client, name).unwrap()
    }
    fn owned_by(lock: &Self::L, owner: Owner) -> Self::L {
        lock.owned_by(owner)
    }
}
impl Fenced for NonReentrantFair {
    fn fenced(client: &Client, name: &str) -> Self::L {
        ferrisson::NonReentrantFairLock::fenced(client, name).unwrap()
    }
}

struct Faster;
impl Kind for Faster {
    type L = ferrisson::FasterMultiLock;
    const NAME: &'static str = "faster multi-lock";
    fn make(client: &Client, name: &str) -> Self::L {
        ferrisson::FasterMultiLock::new(client, name, ["item-1", "item-2", "item-3"]).unwrap()
    }
    fn owned_by(lock: &Self::L, owner: Owner) -> Self::L {
        lock.owned_by(owner)
    }
}

struct Mutex;
impl Kind for Mutex {
    type L = ferrisson::Mutex;
    const NAME: &'static str = "mutex";
    fn make(client: &Client, name: &str) -> ferrisson::Mutex {
        ferrisson::Mutex::new(client, name).unwrap()
    }
    fn owned_by(lock: &ferrisson::Mutex, owner: Owner) -> ferrisson::Mutex {
        lock.owned_by(owner)
    }
}

struct Read;
impl Kind for Read {
    type L = ReadLock;
    const NAME: &'static str = "read lock";
    fn make(client: &Client, name: &str) -> ReadLock {
        ReadWriteLock::new(client, name).unwrap().read_lock()
    }
    fn owned_by(lock: &ReadLock, owner: Owner) -> ReadLock {
        lock.owned_by(owner)
    }
}
impl Fenced for Read {
    fn fenced(client: &Client, name: &str) -> ReadLock {
        ReadWriteLock::fenced(client, name).unwrap().read_lock()
    }
}

/// Exclusion, try and wait limits, force unlock, and the loss signal it raises.
async fn exclusion_force_unlock_and_loss<K: Kind>() {
    let redis = TestRedis::any();
    let name = unique_name("conf-excl");
    let a = client_with_lease(&redis.url(), Duration::from_millis(600)).await;
    let b = client(&redis.url()).await;
    let (on_a, on_b) = (K::make(&a, &name), K::make(&b, &name));
    let what = K::NAME;

    let guard = on_a.lock().await.unwrap();
    assert!(
        on_b.try_lock().await.unwrap().is_none(),
        "{what}: another client"
    );
    assert!(
        on_a.try_lock().await.unwrap().is_none(),
        "{what}: another acquisition"
    );
    let limited = AcquireOptions::new().with_wait(Duration::from_millis(100));
    assert!(
        on_b.try_lock_with(limited).await.unwrap().is_none(),
        "{what}"
    );
    assert!(
        matches!(on_b.lock_with(limited).await, Err(Error::Timeout(_))),
        "{what}: lock_with times out with an error"
    );
    assert!(on_a.is_locked().await.unwrap());
    assert!(on_a.remaining_ttl().await.unwrap().is_some());

    assert!(on_b.force_unlock().await.unwrap(), "{what}: was locked");
    assert!(!on_b.force_unlock().await.unwrap(), "{what}: no longer");
    assert_eq!(
        tokio::time::timeout(SOON, guard.lost()).await.unwrap(),
        LossReason::NotHeld,
        "{what}: the holder is told"
    );
    assert!(matches!(guard.unlock().await, Err(Error::LeaseLost(_))));
    let again = on_b
        .try_lock()
        .await
        .unwrap()
        .expect("free after force unlock");
    again.unlock().await.unwrap();
    assert!(!on_a.is_locked().await.unwrap());
}

/// Fencing tokens grow with every acquisition, across clients and re-entries.
async fn fencing_tokens_grow<K: Fenced>() {
    let redis = TestRedis::any();
    let name = unique_name("conf-fence");
    let clients = [client(&redis.url()).await, client(&redis.url()).await];
    let mut last = 0;
    for round in 0..4 {
        let client = &clients[round % 2];
        let lock = K::fenced(client, &name);
        let guard = lock.lock().await.unwrap();
        let token = guard.token().expect("fenced");
        assert!(token > last, "{}: {token} after {last}", K::NAME);
        last = token;
        guard.unlock().await.unwrap();
    }
    let plain = K::make(&clients[0], &unique_name("conf-plain"));
    let guard = plain.lock().await.unwrap();
    assert_eq!(guard.token(), None, "{}: no token unfenced", K::NAME);
    guard.unlock().await.unwrap();
}

/// A fixed lease ends by itself and the guard says so; bad leases are refused.
async fn leases<K: Kind>() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    let lock = K::make(&a, &unique_name("conf-lease"));
    for lease in [Duration::ZERO, Duration::MAX] {
        let err = lock
            .lock_with(AcquireOptions::new().with_lease(lease))
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::InvalidArgument(_)),
            "{}: {err}",
            K::NAME
        );
    }
    let short = lock
        .lock_with(AcquireOptions::new().with_lease(Duration::from_millis(200)))
        .await
        .unwrap();
    assert!(lock.remaining_ttl().await.unwrap().unwrap() <= Duration::from_millis(200));
    assert_eq!(
        tokio::time::timeout(SOON, short.lost()).await.unwrap(),
        LossReason::LeaseExpired
    );
    eventually(SOON, "the lease ran out on the server", || async {
        !lock.is_locked().await.unwrap()
    })
    .await;
    extend::<K::L>(&lock, K::NAME).await;
}

/// `extend` sets a fixed lease anew, on the server and in the guard; a hold the watchdog keeps
/// and a hold lost (forced open) refuse it.
async fn extend<L: Lock>(lock: &L, kind: &str) {
    let fixed = lock
        .lock_with(AcquireOptions::new().with_lease(Duration::from_secs(2)))
        .await
        .unwrap();
    fixed.extend(Duration::from_secs(60)).await.unwrap();
    let ttl = lock.remaining_ttl().await.unwrap().unwrap();
    assert!(ttl > Duration::from_secs(50), "{kind}: {ttl:?}");
    let deadline = fixed.lease_deadline().unwrap();
    assert!(
        deadline > tokio::time::Instant::now() + Duration::from_secs(50),
        "{kind}"
    );
    assert!(lock.force_unlock().await.unwrap());
    assert!(
        matches!(
            fixed.extend(Duration::from_secs(60)).await,
            Err(Error::LeaseLost(LossReason::NotHeld))
        ),
        "{kind}"
    );
    assert!(fixed.is_lost(), "{kind}");
    drop(fixed);
    let kept = lock.lock().await.unwrap();
    assert!(
        matches!(
            kept.extend(Duration::from_secs(60)).await,
            Err(Error::InvalidArgument(_))
        ),
        "{kind}"
    );
    kept.unlock().await.unwrap();
}

/// A key of another type is a clear error and stays as it was.
async fn wrong_types<K: Kind>() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    let name = unique_name("conf-string");
    let mut con = redis.connection();
    let _: () = con.set(&name, "not a lock").unwrap();
    let lock = K::make(&a, &name);
    for err in [
        lock.try_lock().await.unwrap_err(),
        lock.force_unlock().await.unwrap_err(),
    ] {
        assert!(
            matches!(err, Error::WrongType { .. }),
            "{}: {err:?}",
            K::NAME
        );
    }
    let value: String = con.get(&name).unwrap();
    assert_eq!(value, "not a lock");
    assert!(matches!(
        lock.hold_count().await,
        Err(Error::InvalidArgument(_))
    ));

    // A user's hash at the lock's name (no expiry, fields that are no owners): never waited on,
    // written into or deleted.
    let name = unique_name("conf-hash");
    let _: () = con.hset(&name, "f", "x").unwrap();
    let lock = K::make(&a, &name);
    let waiting = AcquireOptions::new().with_wait(Duration::from_millis(200));
    for err in [
        lock.try_lock().await.unwrap_err(),
        lock.try_lock_with(waiting).await.unwrap_err(),
        lock.lock().await.unwrap_err(),
        lock.force_unlock().await.unwrap_err(),
    ] {
        assert!(
            matches!(err, Error::WrongType { .. }),
            "{}: {err:?}",
            K::NAME
        );
    }
    let hash: std::collections::HashMap<String, String> = con.hgetall(&name).unwrap();
    assert_eq!(
        hash.len(),
        1,
        "{}: the user's hash changed: {hash:?}",
        K::NAME
    );
    assert_eq!(hash.get("f").map(String::as_str), Some("x"));
    let ttl: i64 = con.pttl(&name).unwrap();
    assert_eq!(ttl, -1, "{}: the user's hash got an expiry", K::NAME);
}

/// Lock futures dropped at every stage leave no hold.
async fn dropped_futures_leak_nothing<K: Kind>() {
    let redis = TestRedis::any();
    let name = unique_name("conf-dropped");
    let a = client(&redis.url()).await;
    let b = client(&redis.url()).await;
    let (lock, other) = (K::make(&a, &name), K::make(&b, &name));
    drop_calls_at_every_stage(
        30,
        || async { other.lock().await.unwrap() },
        |_| {
            let lock = lock.clone();
            async move { lock.lock().await.map(drop) }
        },
    )
    .await;
    eventually(SOON, "no hold left", || async {
        !lock.is_locked().await.unwrap()
    })
    .await;
}

/// Held, waited for by another client (one waiter served, one giving up), released: no key of
/// the lock is left without a TTL but those the layout keeps (its fencing counter).
async fn no_key_lasts_after_use<K: Kind>() {
    let redis = TestRedis::any();
    let name = unique_name("conf-lasting");
    let a = client(&redis.url()).await;
    let b = client(&redis.url()).await;
    let (lock, other) = (K::make(&a, &name), K::make(&b, &name));
    let held = lock.lock().await.unwrap();
    let late = other
        .try_lock_with(AcquireOptions::new().with_wait(Duration::from_millis(100)))
        .await
        .unwrap();
    assert!(late.is_none(), "{}: held", K::NAME);
    let waiter = tokio::spawn({
        let other = other.clone();
        async move {
            other
                .try_lock_with(AcquireOptions::new().with_wait(SOON))
                .await
                .unwrap()
                .expect("served once released")
                .unlock()
                .await
                .unwrap();
        }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    held.unlock().await.unwrap();
    tokio::time::timeout(SOON, waiter).await.unwrap().unwrap();
    let lasting = common::lasting_keys(&mut redis.connection(), &format!("*{name}*"));
    assert!(
        lasting.is_empty(),
        "{}: keys left without a TTL: {lasting:?}",
        K::NAME
    );
}

/// A bound owner re-enters and each hold counts; `owner`, `is_held_by`, `hold_count_of`; and a
/// watcher on another client (`wait_unlocked`) waits until the last hold is gone.
async fn owners_and_watchers<K: Kind>() {
    let redis = TestRedis::any();
    let name = unique_name("conf-owner");
    let a = client(&redis.url()).await;
    let b = client(&redis.url()).await;
    let lock = K::make(&a, &name);
    assert!(lock.owner().is_none(), "{}", K::NAME);
    let owner = a.new_owner();
    let bound = K::owned_by(&lock, owner.clone());
    assert_eq!(bound.owner(), Some(&owner), "{}", K::NAME);
    let first = bound.lock().await.unwrap();
    let second = bound.lock().await.unwrap();
    assert_eq!(bound.hold_count().await.unwrap(), 2, "{}", K::NAME);
    assert!(lock.is_held_by(&owner).await.unwrap(), "{}", K::NAME);
    assert!(bound.is_held_by_current().await.unwrap(), "{}", K::NAME);
    assert!(
        !lock.is_held_by(&a.new_owner()).await.unwrap(),
        "{}",
        K::NAME
    );

    let watched = K::make(&b, &name);
    let watcher = tokio::spawn(async move { watched.wait_unlocked().await });
    second.unlock().await.unwrap();
    assert_eq!(bound.hold_count_of(&owner).await.unwrap(), 1, "{}", K::NAME);
    assert!(
        !watcher.is_finished(),
        "{}: the watcher returned while a hold was left",
        K::NAME
    );
    first.unlock().await.unwrap();
    tokio::time::timeout(SOON, watcher)
        .await
        .unwrap_or_else(|_| panic!("{}: the watcher is still waiting", K::NAME))
        .unwrap()
        .unwrap();
    assert!(!lock.is_locked().await.unwrap(), "{}", K::NAME);
    assert_eq!(bound.hold_count().await.unwrap(), 0, "{}", K::NAME);
}

macro_rules! owners {
    ($($kind:ident => $test:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $test() {
            owners_and_watchers::<$kind>().await;
        }
    )*};
}

owners!(
    Reentrant => reentrant_lock_owners_and_watchers,
    Fair => fair_lock_owners_and_watchers,
    Write => write_lock_owners_and_watchers,
    Read => read_lock_owners_and_watchers,
    Spin => spin_lock_owners_and_watchers,
    Faster => faster_multilock_owners_and_watchers,
);

macro_rules! conformance {
    ($($kind:ident => $module:ident),* $(,)?) => {$(
        mod $module {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn exclusion_force_unlock_and_loss() {
                super::exclusion_force_unlock_and_loss::<$kind>().await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn fencing_tokens_grow() {
                super::fencing_tokens_grow::<$kind>().await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn leases() {
                super::leases::<$kind>().await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn wrong_types() {
                super::wrong_types::<$kind>().await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn dropped_futures_leak_nothing() {
                super::dropped_futures_leak_nothing::<$kind>().await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn no_key_lasts_after_use() {
                super::no_key_lasts_after_use::<$kind>().await;
            }
        }
    )*};
}

conformance!(
    Reentrant => reentrant_lock,
    Fair => fair_lock,
    Write => write_lock,
    Spin => spin_lock,
    NonReentrant => non_reentrant_lock,
    NonReentrantFair => non_reentrant_fair_lock,
);

/// The faster multi-lock's part of the suite: all but fencing (Redisson's layout has none).
mod faster_multilock {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn exclusion_force_unlock_and_loss() {
        super::exclusion_force_unlock_and_loss::<Faster>().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn leases() {
        super::leases::<Faster>().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn wrong_types() {
        super::wrong_types::<Faster>().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dropped_futures_leak_nothing() {
        super::dropped_futures_leak_nothing::<Faster>().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn no_key_lasts_after_use() {
        super::no_key_lasts_after_use::<Faster>().await;
    }
}

/// The mutex's part of the suite: what needs neither re-entry nor fencing (its own file has
/// the rest: a string at its name is a mutex there, held by another token).
mod mutex {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn exclusion_force_unlock_and_loss() {
        super::exclusion_force_unlock_and_loss::<Mutex>().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn leases() {
        super::leases::<Mutex>().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dropped_futures_leak_nothing() {
        super::dropped_futures_leak_nothing::<Mutex>().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn no_key_lasts_after_use() {
        super::no_key_lasts_after_use::<Mutex>().await;
    }
}

/// A lock of one family at a name is no lock of the other: a reentrant or fair lock meets a
/// read-write lock's hash (its `mode` field), and the read and write locks meet a reentrant
/// lock's hash (no `mode`). Each is a clear error, and the holder keeps its hold untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_of_one_family_is_no_lock_of_the_other() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    let mut con = redis.connection();

    let name = unique_name("conf-family-rw");
    let rw = ReadWriteLock::new(&a, &name).unwrap();
    let writer = rw.write_lock().lock().await.unwrap();
    for err in [
        ReentrantLock::new(&a, &name)
            .unwrap()
            .try_lock()
            .await
            .unwrap_err(),
        FairLock::new(&a, &name)
            .unwrap()
            .try_lock()
            .await
            .unwrap_err(),
        ReentrantLock::new(&a, &name)
            .unwrap()
            .force_unlock()
            .await
            .unwrap_err(),
    ] {
        assert!(matches!(err, Error::WrongType { .. }), "{err:?}");
    }
    assert!(writer.ensure_held().is_ok());
    writer.unlock().await.unwrap();

    let name = unique_name("conf-family-hash");
    let lock = ReentrantLock::new(&a, &name).unwrap();
    let guard = lock.lock().await.unwrap();
    let rw = ReadWriteLock::new(&a, &name).unwrap();
    for err in [
        rw.read_lock().try_lock().await.unwrap_err(),
        rw.write_lock().try_lock().await.unwrap_err(),
        rw.force_unlock().await.unwrap_err(),
    ] {
        assert!(matches!(err, Error::WrongType { .. }), "{err:?}");
    }
    let fields: Vec<String> = con.hkeys(&name).unwrap();
    assert_eq!(fields, vec![guard.owner().to_string()]);
    guard.unlock().await.unwrap();
}

/// The read side's fixed leases extend as every other kind's (the write side's run in `leases`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_lock_extend() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    let lock = <Read as Kind>::make(&a, &unique_name("conf-read-extend"));
    extend(&lock, <Read as Kind>::NAME).await;
}
