//! The calls Redisson users reach for first, with Redisson's meaning: every synchronizer's
//! `exists` / `expire` / `clear_expire` / `remaining_ttl` / `delete` ([`SyncObject`], tested
//! once over every kind), the permit-expirable semaphore's `set_permits` (the total), the
//! semaphore's `try_set_permits_with_ttl` and `release_if_exists`, `try_release_many` of ids,
//! each read-write side's `is_locked` and `force_unlock`, and `is_held_by` an owner.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common;

use std::time::Duration;

use common::{TestRedis, client, command_calls, delta, eventually, unique_name};
use ferrisson::{AcquireOptions, Client, Error, FencedLock, Lock, ReentrantLock, SyncObject};
use ferrisson_expirable_semaphore::ExpirableSemaphore;
use ferrisson_fair_lock::FairLock;
use ferrisson_latch::CountDownLatch;
use ferrisson_rate_limiter::{RateLimiter, RateType};
use ferrisson_rwlock::ReadWriteLock;
use ferrisson_semaphore::Semaphore;
use ferrisson_spin_lock::SpinLock;
use redis::Commands;

const SOON: Duration = Duration::from_secs(10);

/// The time to live the object checks set.
const TTL: Duration = Duration::from_secs(120);

/// One synchronizer set up (held, set, or with its rate), its state keys that exist once set
/// up, and its counters.
struct Subject {
    what: &'static str,
    object: Box<dyn Fn() -> BoxedObject + Send + Sync>,
    state: Vec<String>,
    counters: Vec<String>,
}

/// A synchronizer behind the trait's methods, for a suite generic over kinds.
struct BoxedObject(Box<dyn ObjectCalls>);

trait ObjectCalls: Send + Sync {
    fn boxed_exists(&self) -> futures::future::BoxFuture<'_, ferrisson::Result<bool>>;
    fn boxed_expire(
        &self,
        ttl: Duration,
    ) -> futures::future::BoxFuture<'_, ferrisson::Result<bool>>;
    fn boxed_clear_expire(&self) -> futures::future::BoxFuture<'_, ferrisson::Result<bool>>;
    fn boxed_remaining_ttl(
        &self,
    ) -> futures::future::BoxFuture<'_, ferrisson::Result<Option<Duration>>>;
    fn boxed_delete(&self) -> futures::future::BoxFuture<'_, ferrisson::Result<bool>>;
}

impl<T: SyncObject> ObjectCalls for T {
    fn boxed_exists(&self) -> futures::future::BoxFuture<'_, ferrisson::Result<bool>> {
        Box::pin(SyncObject::exists(self))
    }
    fn boxed_expire(
        &self,
        ttl: Duration,
    ) -> futures::future::BoxFuture<'_, ferrisson::Result<bool>> {
        Box::pin(SyncObject::expire(self, ttl))
    }
    fn boxed_clear_expire(&self) -> futures::future::BoxFuture<'_, ferrisson::Result<bool>> {
        Box::pin(SyncObject::clear_expire(self))
    }
    fn boxed_remaining_ttl(
        &self,
    ) -> futures::future::BoxFuture<'_, ferrisson::Result<Option<Duration>>> {
        Box::pin(SyncObject::remaining_ttl(self))
    }
    fn boxed_delete(&self) -> futures::future::BoxFuture<'_, ferrisson::Result<bool>> {
        Box::pin(SyncObject::delete(self))
    }
}

fn boxed(object: impl SyncObject + Clone + 'static) -> Box<dyn Fn() -> BoxedObject + Send + Sync> {
    Box::new(move || BoxedObject(Box::new(object.clone())))
}

/// Sets up one of every kind on `client`, each held or set so that its keys exist.
async fn subjects(
    client: &Client,
    con: &mut redis::Connection,
) -> (Vec<Subject>, Vec<ferrisson::HoldGuard>) {
    let mut guards = Vec::new();
    let mut out = Vec::new();
    // Locks are held with a fixed lease, so that nothing renews them during the checks.
    let held = AcquireOptions::new().with_lease(Duration::from_secs(600));

    let name = unique_name("parity-lock");
    let lock = FencedLock::new(client, &name).unwrap();
    guards.push(lock.lock_with(held).await.unwrap().into_inner());
    out.push(Subject {
        what: "fenced lock",
        object: boxed(lock),
        state: vec![name.clone()],
        counters: vec![format!("redisson_lock_token:{{{name}}}")],
    });

    let name = unique_name("parity-spin");
    let lock = SpinLock::new(client, &name).unwrap();
    guards.push(lock.lock_with(held).await.unwrap());
    out.push(Subject {
        what: "spin lock",
        object: boxed(lock),
        state: vec![name],
        counters: vec![],
    });

    // The fair lock with a waiter queued behind its holder, so that its queue keys exist.
    let name = unique_name("parity-fair");
    let lock = FairLock::new(client, &name).unwrap();
    guards.push(lock.lock_with(held).await.unwrap());
    let waiter = lock.clone();
    tokio::spawn(async move {
        let _ = waiter.lock_with(held).await;
    });
    let queue = format!("redisson_lock_queue:{{{name}}}");
    eventually(SOON, "the fair lock's waiter queued", || {
        let len: usize = con.llen(&queue).unwrap();
        async move { len == 1 }
    })
    .await;
    out.push(Subject {
        what: "fair lock",
        object: boxed(lock),
        state: vec![
            name.clone(),
            queue,
            format!("redisson_lock_timeout:{{{name}}}"),
            format!("{{{name}}}:alive"),
        ],
        counters: vec![],
    });

    let name = unique_name("parity-rw");
    let rw = ReadWriteLock::new(client, &name).unwrap();
    guards.push(rw.read_lock().lock_with(held).await.unwrap());
    out.push(Subject {
        what: "read-write lock (read side)",
        object: boxed(rw.read_lock()),
        state: vec![name],
        counters: vec![],
    });

    let name = unique_name("parity-sem");
    let semaphore = Semaphore::new(client, &name).unwrap();
    assert!(semaphore.try_set_permits(3).await.unwrap());
    out.push(Subject {
        what: "semaphore",
        object: boxed(semaphore),
        state: vec![name],
        counters: vec![],
    });

    let name = unique_name("parity-exp");
    let expirable = ExpirableSemaphore::new(client, &name).unwrap();
    assert!(expirable.try_set_permits(3).await.unwrap());
    let permit = expirable
        .acquire_with(AcquireOptions::new().with_lease(Duration::from_secs(600)))
        .await
        .unwrap();
    permit.detach();
    out.push(Subject {
        what: "expirable semaphore",
        object: boxed(expirable),
        state: vec![name.clone(), format!("{{{name}}}:timeout")],
        counters: vec![],
    });

    let name = unique_name("parity-latch");
    let latch = CountDownLatch::new(client, &name).unwrap();
    assert!(latch.try_set_count(2).await.unwrap());
    out.push(Subject {
        what: "countdown latch",
        object: boxed(latch),
        state: vec![name],
        counters: vec![],
    });

    let name = unique_name("parity-rate");
    let limiter = RateLimiter::new(client, &name).unwrap();
    assert!(
        limiter
            .try_set_rate(RateType::Overall, 10, Duration::from_secs(1))
            .await
            .unwrap()
    );
    assert!(limiter.try_acquire(1).await.unwrap());
    out.push(Subject {
        what: "rate limiter",
        object: boxed(limiter),
        state: vec![
            name.clone(),
            format!("{{{name}}}:value"),
            format!("{{{name}}}:permits"),
        ],
        counters: vec![],
    });
    (out, guards)
}

fn pttl(con: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query(con).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_synchronizer_exists_expires_and_deletes_as_redisson_objects_do() {
    let redis = TestRedis::any();
    let client = client(&redis.url()).await;
    let mut con = redis.connection();
    let (subjects, guards) = subjects(&client, &mut con).await;
    for subject in &subjects {
        let what = subject.what;
        let object = (subject.object)().0;
        assert!(
            object.boxed_exists().await.unwrap(),
            "{what}: exists once set up"
        );

        // An expiry on every state key, never on a counter.
        assert!(object.boxed_expire(TTL).await.unwrap(), "{what}: expire");
        let left = object.boxed_remaining_ttl().await.unwrap();
        assert!(
            left.is_some_and(|left| left <= TTL && left > TTL - SOON),
            "{what}: remaining_ttl {left:?} after expire({TTL:?})"
        );
        for key in &subject.state {
            let ttl = pttl(&mut con, key);
            assert!(ttl > 0 && ttl <= 120_000, "{what}: {key} has PTTL {ttl}");
        }
        for key in &subject.counters {
            assert_eq!(
                pttl(&mut con, key),
                -1,
                "{what}: counter {key} never expires"
            );
        }

        // Cleared from every state key.
        assert!(
            object.boxed_clear_expire().await.unwrap(),
            "{what}: clear_expire"
        );
        assert_eq!(object.boxed_remaining_ttl().await.unwrap(), None, "{what}");
        for key in &subject.state {
            assert_eq!(pttl(&mut con, key), -1, "{what}: {key} persists");
        }
        assert!(
            !object.boxed_clear_expire().await.unwrap(),
            "{what}: nothing left to clear"
        );

        // Durations Redis cannot take are refused before anything is sent.
        for bad in [Duration::ZERO, Duration::from_micros(999), Duration::MAX] {
            assert!(
                matches!(
                    object.boxed_expire(bad).await,
                    Err(Error::InvalidArgument(_))
                ),
                "{what}: expire({bad:?})"
            );
        }
        assert_eq!(object.boxed_remaining_ttl().await.unwrap(), None, "{what}");

        // Deleted whole: state keys and counters.
        assert!(object.boxed_delete().await.unwrap(), "{what}: delete");
        assert!(!object.boxed_exists().await.unwrap(), "{what}: gone");
        for key in subject.state.iter().chain(&subject.counters) {
            let exists: bool = con.exists(key).unwrap();
            assert!(!exists, "{what}: {key} deleted");
        }
        assert!(
            !object.boxed_delete().await.unwrap(),
            "{what}: nothing to delete"
        );
        assert!(
            !object.boxed_expire(TTL).await.unwrap(),
            "{what}: nothing to expire"
        );
        assert_eq!(object.boxed_remaining_ttl().await.unwrap(), None, "{what}");
    }
    drop(guards);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn object_calls_never_touch_someone_elses_key() {
    let redis = TestRedis::any();
    let client = client(&redis.url()).await;
    let mut con = redis.connection();
    // A user's hash where a lock would be, a user's list where a semaphore would be.
    let lock_name = unique_name("foreign-lock");
    let _: () = con.hset(&lock_name, "name", "ada").unwrap();
    let sem_name = unique_name("foreign-sem");
    let _: () = con.rpush(&sem_name, "job").unwrap();
    let lock = ReentrantLock::new(&client, &lock_name).unwrap();
    let semaphore = Semaphore::new(&client, &sem_name).unwrap();
    let rw = ReadWriteLock::new(&client, &lock_name).unwrap();
    assert!(matches!(
        lock.expire(TTL).await,
        Err(Error::WrongType { .. })
    ));
    assert!(matches!(lock.delete().await, Err(Error::WrongType { .. })));
    assert!(matches!(rw.delete().await, Err(Error::WrongType { .. })));
    assert!(matches!(
        semaphore.expire(TTL).await,
        Err(Error::WrongType { .. })
    ));
    assert!(matches!(
        semaphore.delete().await,
        Err(Error::WrongType { .. })
    ));
    assert!(matches!(
        semaphore.clear_expire().await,
        Err(Error::WrongType { .. })
    ));
    // Nothing changed.
    let name: String = con.hget(&lock_name, "name").unwrap();
    assert_eq!(name, "ada");
    assert_eq!(pttl(&mut con, &lock_name), -1);
    let len: usize = con.llen(&sem_name).unwrap();
    assert_eq!(len, 1);
    assert_eq!(pttl(&mut con, &sem_name), -1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_held_lock_wakes_its_waiter_and_tells_the_holder() {
    let redis = TestRedis::any();
    // The holder's lease is long: a waiter woken only by its end would wait 20 s.
    let holder = common::client_with_lease(&redis.url(), Duration::from_secs(20)).await;
    let other = client(&redis.url()).await;
    let name = unique_name("delete-held");
    let guard = ReentrantLock::new(&holder, &name)
        .unwrap()
        .lock()
        .await
        .unwrap();
    let waiter_lock = ReentrantLock::new(&other, &name).unwrap();
    let waiting = tokio::spawn(async move {
        let guard = waiter_lock
            .lock_with(AcquireOptions::new().with_lease(Duration::from_secs(60)))
            .await
            .unwrap();
        guard.unlock().await.unwrap();
    });
    eventually(SOON, "the waiter waits", || async {
        other.waiter_stats().1 == 1
    })
    .await;
    assert!(
        ReentrantLock::new(&other, &name)
            .unwrap()
            .delete()
            .await
            .unwrap()
    );
    common::join_within(
        Duration::from_secs(8),
        "the waiter gets in, woken by the delete",
        vec![waiting],
    )
    .await;
    // The holder's next renewal (a third of its lease) finds the hold gone.
    let lost = tokio::time::timeout(Duration::from_secs(20), guard.lost()).await;
    assert!(lost.is_ok(), "the holder is told its hold is gone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expirable_set_permits_sets_the_total_as_redisson_does() {
    let redis = TestRedis::any();
    let client = client(&redis.url()).await;
    let semaphore = ExpirableSemaphore::new(&client, &unique_name("total")).unwrap();
    assert!(semaphore.try_set_permits(5).await.unwrap());
    let taken = semaphore.acquire_many(3).await.unwrap();
    let counts = || async {
        (
            semaphore.total_permits().await.unwrap(),
            semaphore.available_permits().await.unwrap(),
            semaphore.acquired_permits().await.unwrap(),
        )
    };
    assert_eq!(counts().await, (5, 2, 3));
    semaphore.set_permits(3).await.unwrap();
    assert_eq!(counts().await, (3, 0, 3));
    semaphore.set_permits(2).await.unwrap();
    assert_eq!(counts().await, (2, -1, 3));
    // Giving one back does not free one yet; giving all back leaves the total free.
    let mut taken = taken.into_iter();
    taken.next().unwrap().release().await.unwrap();
    assert_eq!(counts().await, (2, 0, 2));
    for permit in taken {
        permit.release().await.unwrap();
    }
    assert_eq!(counts().await, (2, 2, 0));
    // Expired permits count as free when the total is set.
    let _short = semaphore
        .acquire_with(AcquireOptions::new().with_lease(Duration::from_millis(50)))
        .await
        .unwrap()
        .detach();
    eventually(SOON, "the short permit expires", || async {
        semaphore.acquired_permits().await.unwrap() == 0
    })
    .await;
    semaphore.set_permits(4).await.unwrap();
    assert_eq!(counts().await, (4, 4, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_set_permits_sets_the_free_count() {
    let redis = TestRedis::any();
    let client = client(&redis.url()).await;
    let semaphore = Semaphore::new(&client, &unique_name("free")).unwrap();
    assert!(semaphore.try_set_permits(5).await.unwrap());
    let taken = semaphore.acquire_many(3).await.unwrap();
    semaphore.set_permits(3).await.unwrap();
    assert_eq!(semaphore.available_permits().await.unwrap(), 3);
    taken.release().await.unwrap();
    assert_eq!(semaphore.available_permits().await.unwrap(), 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_count_set_with_a_ttl_expires_and_a_late_release_does_not_revive_it() {
    let redis = TestRedis::any();
    let client = client(&redis.url()).await;
    let name = unique_name("ttl-count");
    let semaphore = Semaphore::new(&client, &name).unwrap();
    for bad in [Duration::ZERO, Duration::MAX] {
        assert!(matches!(
            semaphore.try_set_permits_with_ttl(2, bad).await,
            Err(Error::InvalidArgument(_))
        ));
    }
    assert!(!semaphore.exists().await.unwrap(), "nothing was set");
    assert!(
        semaphore
            .try_set_permits_with_ttl(2, Duration::from_millis(300))
            .await
            .unwrap()
    );
    assert!(
        !semaphore
            .try_set_permits_with_ttl(9, Duration::from_millis(300))
            .await
            .unwrap(),
        "set once"
    );
    let left = semaphore.remaining_ttl().await.unwrap().unwrap();
    assert!(left <= Duration::from_millis(300));
    let permit = semaphore.acquire().await.unwrap();
    eventually(SOON, "the count expires", || async {
        !semaphore.exists().await.unwrap()
    })
    .await;
    permit.forget();
    assert!(!semaphore.release_if_exists(1).await.unwrap());
    assert!(!semaphore.exists().await.unwrap(), "not revived");

    // On a count that is set, it releases like `release`.
    assert!(semaphore.try_set_permits(1).await.unwrap());
    assert!(semaphore.release_if_exists(2).await.unwrap());
    assert_eq!(semaphore.available_permits().await.unwrap(), 3);

    // Zero releases nothing and sends nothing.
    let mut con = redis.connection();
    let before = command_calls(&mut con);
    assert!(!semaphore.release_if_exists(0).await.unwrap());
    let after = command_calls(&mut con);
    assert_eq!(delta(&before, &after, "evalsha"), 0);
    assert_eq!(semaphore.available_permits().await.unwrap(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expirable_acquire_carries_the_counts_ttl_onto_the_permit_set() {
    // Redisson's acquire copies the count's TTL onto `{name}:timeout`: after an `expire`, the
    // permit set an acquire makes goes with the count instead of staying without a TTL.
    let redis = TestRedis::any();
    let client = client(&redis.url()).await;
    let name = unique_name("ttl-expirable");
    let semaphore = ExpirableSemaphore::new(&client, &name).unwrap();
    assert!(semaphore.try_set_permits(3).await.unwrap());
    assert!(semaphore.expire(Duration::from_secs(3)).await.unwrap());
    let permit = semaphore.acquire().await.unwrap();
    let timeouts = format!("{{{}}}:timeout", semaphore.key());
    let mut con = redis.connection();
    let left = pttl(&mut con, &timeouts);
    assert!(
        (1..=3000).contains(&left),
        "the permit set's TTL is the count's: {left} ms"
    );
    assert!(pttl(&mut con, semaphore.key()) > 0);
    permit.release().await.unwrap();
    // Without a TTL on the count, the set keeps none either.
    assert!(semaphore.clear_expire().await.unwrap());
    let _permit = semaphore.acquire().await.unwrap();
    assert_eq!(pttl(&mut con, &timeouts), -1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_release_many_releases_the_held_ids_and_counts_them() {
    let redis = TestRedis::any();
    let client = client(&redis.url()).await;
    let semaphore = ExpirableSemaphore::new(&client, &unique_name("try-release")).unwrap();
    assert!(semaphore.try_set_permits(3).await.unwrap());
    let ids: Vec<String> = semaphore
        .acquire_many(3)
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.detach())
        .collect();
    semaphore.release(&ids[0]).await.unwrap();
    let unknown = "0123456789abcdef0123456789abcdef";
    let list = [ids[0].as_str(), ids[1].as_str(), ids[2].as_str(), unknown];
    assert_eq!(semaphore.try_release_many(&list).await.unwrap(), 2);
    assert_eq!(semaphore.available_permits().await.unwrap(), 3);
    assert_eq!(semaphore.try_release_many(&list).await.unwrap(), 0);
    assert_eq!(semaphore.available_permits().await.unwrap(), 3);
    assert!(matches!(
        semaphore.try_release_many(&[]).await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        semaphore.try_release_many(&["not-an-id"]).await,
        Err(Error::InvalidArgument(_))
    ));
    // The all-or-nothing release of a list still refuses a list with one id not held.
    let id = semaphore.acquire().await.unwrap().detach();
    assert!(matches!(
        semaphore.release_all(&[id.as_str(), unknown]).await,
        Err(Error::NotOwner(_))
    ));
    assert_eq!(semaphore.acquired_permits().await.unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_read_write_side_reports_and_force_unlocks_only_itself() {
    let redis = TestRedis::any();
    let client = client(&redis.url()).await;
    let rw = ReadWriteLock::new(&client, &unique_name("sides")).unwrap();
    let (read, write) = (rw.read_lock(), rw.write_lock());
    assert!(!read.is_locked().await.unwrap() && !write.is_locked().await.unwrap());

    let reader = read.lock().await.unwrap();
    assert!(read.is_locked().await.unwrap());
    assert!(!write.is_locked().await.unwrap());
    assert!(rw.is_locked().await.unwrap());
    assert!(read.is_held_by(reader.owner()).await.unwrap());
    assert!(!write.is_held_by(reader.owner()).await.unwrap());
    assert!(
        !write.force_unlock().await.unwrap(),
        "no writer to force out"
    );
    assert!(read.is_locked().await.unwrap(), "the reader still holds it");
    // A writer waits; forcing the readers out lets it in.
    let waiting_write = write.clone();
    let writer = tokio::spawn(async move { waiting_write.lock().await.unwrap() });
    eventually(SOON, "the writer waits", || async {
        client.waiter_stats().1 == 1
    })
    .await;
    assert!(read.force_unlock().await.unwrap());
    let writer = common::join_within(SOON, "the writer gets in", vec![writer])
        .await
        .pop()
        .unwrap();
    assert!(write.is_locked().await.unwrap());
    assert!(!read.is_locked().await.unwrap());
    assert!(write.is_held_by(writer.owner()).await.unwrap());
    assert!(
        !read.force_unlock().await.unwrap(),
        "no reader to force out"
    );
    assert!(write.is_locked().await.unwrap());
    assert!(write.force_unlock().await.unwrap());
    assert!(!rw.is_locked().await.unwrap());
    drop(reader);
    drop(writer);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn is_held_by_names_the_guards_owner_on_every_lock_kind() {
    let redis = TestRedis::any();
    let client = client(&redis.url()).await;
    let stranger = client.new_owner();
    let reentrant = ReentrantLock::new(&client, &unique_name("held-by")).unwrap();
    let fair = FairLock::new(&client, &unique_name("held-by-fair")).unwrap();
    let spin = SpinLock::new(&client, &unique_name("held-by-spin")).unwrap();
    let write = ReadWriteLock::new(&client, &unique_name("held-by-rw"))
        .unwrap()
        .write_lock();
    async fn check(lock: &impl Lock, stranger: &ferrisson::Owner) {
        let guard = lock.lock().await.unwrap();
        let owner = guard.owner().clone();
        assert!(lock.is_held_by(&owner).await.unwrap());
        assert_eq!(lock.hold_count_of(&owner).await.unwrap(), 1);
        assert!(!lock.is_held_by(stranger).await.unwrap());
        guard.unlock().await.unwrap();
        assert!(!lock.is_held_by(&owner).await.unwrap());
    }
    check(&reentrant, &stranger).await;
    check(&fair, &stranger).await;
    check(&spin, &stranger).await;
    check(&write, &stranger).await;
}

/// A watcher of client `client` on `lock`: resolves when `wait_unlocked` does.
fn watch<L: Lock + Clone + 'static>(lock: &L) -> tokio::task::JoinHandle<()> {
    let lock = lock.clone();
    tokio::spawn(async move { lock.wait_unlocked().await.unwrap() })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_unlocked_ends_with_the_release_and_passes_on_the_wake_up_it_takes() {
    let redis = TestRedis::any();
    // The holder's lease is long: only the release message ends the waits soon.
    let holder = common::client_with_lease(&redis.url(), Duration::from_secs(30)).await;
    let other = client(&redis.url()).await;
    let name = unique_name("watch");
    let lock = ReentrantLock::new(&other, &name).unwrap();
    // Not held: at once.
    tokio::time::timeout(SOON, lock.wait_unlocked())
        .await
        .expect("an unheld lock is not waited on")
        .unwrap();

    let guard = ReentrantLock::new(&holder, &name)
        .unwrap()
        .lock()
        .await
        .unwrap();
    // A watcher first, then a real waiter of the same client behind it.
    let watcher = watch(&lock);
    eventually(SOON, "the watcher listens", || async {
        other.waiter_stats().1 == 1
    })
    .await;
    let waiter_lock = lock.clone();
    let waiter = tokio::spawn(async move {
        let guard = waiter_lock.lock().await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        guard.unlock().await.unwrap();
    });
    eventually(SOON, "the waiter waits too", || async {
        other.waiter_stats().1 == 2
    })
    .await;
    assert!(!watcher.is_finished(), "the lock is held");
    guard.unlock().await.unwrap();
    // The release's one wake-up may reach the watcher first: it passes it on, and the waiter
    // gets in long before the 30 s lease could have woken it.
    common::join_within(
        Duration::from_secs(8),
        "the waiter and the watcher are done",
        vec![waiter, watcher],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_unlocked_ends_when_the_lease_runs_out_and_on_kinds_that_publish_nothing() {
    let redis = TestRedis::any();
    let holder = client(&redis.url()).await;
    let other = client(&redis.url()).await;
    // A fixed lease that runs out.
    let name = unique_name("watch-lease");
    let _guard = ReentrantLock::new(&holder, &name)
        .unwrap()
        .lock_with(AcquireOptions::new().with_lease(Duration::from_millis(300)))
        .await
        .unwrap();
    common::join_within(
        SOON,
        "the watch ends with the lease",
        vec![watch(&ReentrantLock::new(&other, &name).unwrap())],
    )
    .await;

    // The spin lock publishes nothing: its watcher polls. The fair lock's release wakes the
    // head waiter and, from this library, its watchers too.
    let spin_name = unique_name("watch-spin");
    let spin = SpinLock::new(&holder, &spin_name)
        .unwrap()
        .lock()
        .await
        .unwrap();
    let fair_name = unique_name("watch-fair");
    let fair = FairLock::new(&holder, &fair_name)
        .unwrap()
        .lock()
        .await
        .unwrap();
    let watchers = vec![
        watch(&SpinLock::new(&other, &spin_name).unwrap()),
        watch(&FairLock::new(&other, &fair_name).unwrap()),
    ];
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(watchers.iter().all(|w| !w.is_finished()), "both are held");
    spin.unlock().await.unwrap();
    fair.unlock().await.unwrap();
    common::join_within(SOON, "both watches end", watchers).await;
}

/// A fair lock's watcher listens on the lock's channel, where this library's releases publish
/// too **[ext]**: while the lock is held it looks again only once a second (a release by a
/// Redisson client wakes the head waiter alone, so it cannot rely on a message), where a
/// watcher that polled with a backoff from 1 ms looked a dozen times in the same time; the
/// release ends it at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_lock_watcher_listens_and_looks_again_only_once_a_second() {
    let server = ferrisson_testkit::RedisServer::spawn();
    let holder = common::client_with_lease(&server.url(), Duration::from_secs(30)).await;
    let other = client(&server.url()).await;
    let name = unique_name("watch-fair-listens");
    let guard = FairLock::new(&holder, &name).unwrap().lock().await.unwrap();
    let mut con = server.connection();
    let before = command_calls(&mut con);
    let watcher = watch(&FairLock::new(&other, &name).unwrap());
    // The window the looks are counted over.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert!(!watcher.is_finished(), "the lock is held");
    let looks = delta(&before, &command_calls(&mut con), "exists");
    assert!(
        (1..=4).contains(&looks),
        "{looks} looks at a fair lock held for 2.5 s"
    );
    // The release's message on the lock's own channel, which the watcher listens on.
    let mut listener = server.connection();
    let mut listener = listener.as_pubsub();
    listener
        .subscribe(format!("redisson_lock__channel:{{{name}}}"))
        .unwrap();
    listener.set_read_timeout(Some(SOON)).unwrap();
    guard.unlock().await.unwrap();
    let message = listener.get_message().unwrap();
    assert_eq!(message.get_payload::<String>().unwrap(), "0");
    common::join_within(SOON, "the release ends the watch", vec![watcher]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_unlocked_on_a_read_write_side_waits_for_that_side() {
    let redis = TestRedis::any();
    let holder = client(&redis.url()).await;
    let other = client(&redis.url()).await;
    let name = unique_name("watch-rw");
    let reader = ReadWriteLock::new(&holder, &name)
        .unwrap()
        .read_lock()
        .lock()
        .await
        .unwrap();
    let rw = ReadWriteLock::new(&other, &name).unwrap();
    tokio::time::timeout(SOON, rw.write_lock().wait_unlocked())
        .await
        .expect("no writer holds it")
        .unwrap();
    let watcher = watch(&rw.read_lock());
    eventually(SOON, "the watcher listens", || async {
        other.waiter_stats().1 == 1
    })
    .await;
    assert!(!watcher.is_finished());
    reader.unlock().await.unwrap();
    common::join_within(SOON, "the readers are gone", vec![watcher]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_unlocked_waits_through_a_redis_restart() {
    let mut server = common::RedisServer::spawn();
    let holder = client(&server.url()).await;
    let other = client(&server.url()).await;
    let name = unique_name("watch-restart");
    let _guard = ReentrantLock::new(&holder, &name)
        .unwrap()
        .lock()
        .await
        .unwrap();
    let watcher = watch(&ReentrantLock::new(&other, &name).unwrap());
    eventually(SOON, "the watcher listens", || async {
        other.waiter_stats().1 == 1
    })
    .await;
    // The lock vanishes with the restart (no persistence): the watcher sees it free.
    server.restart();
    common::join_within(Duration::from_secs(20), "the watch ends", vec![watcher]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_key_is_left_without_a_ttl_once_everything_is_released_or_deleted() {
    use ferrisson::Mutex;
    let server = common::RedisServer::spawn();
    let (client, other) = (client(&server.url()).await, client(&server.url()).await);
    let soon = AcquireOptions::new().with_wait(SOON);

    // Every lock kind: held, waited for by a second client, released.
    let name = unique_name("ttl-lock");
    let lock = ReentrantLock::new(&client, &name).unwrap();
    let guard = lock.lock().await.unwrap();
    let waiter = ReentrantLock::new(&other, &name).unwrap();
    let waiting = tokio::spawn(async move { waiter.lock().await.unwrap().unlock().await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    guard.unlock().await.unwrap();
    waiting.await.unwrap().unwrap();

    let fenced = FencedLock::new(&client, &unique_name("ttl-fenced")).unwrap();
    fenced.lock().await.unwrap().unlock().await.unwrap();

    let name = unique_name("ttl-fair");
    let fair = FairLock::new(&client, &name).unwrap();
    let guard = fair.lock().await.unwrap();
    let waiter = FairLock::new(&other, &name).unwrap();
    let waiting = tokio::spawn(async move { waiter.lock().await.unwrap().unlock().await });
    eventually(SOON, "the fair waiter queues", || {
        let fair = fair.clone();
        async move { fair.queue_length().await.unwrap() == 1 }
    })
    .await;
    guard.unlock().await.unwrap();
    waiting.await.unwrap().unwrap();
    // A waiter that gives up.
    let guard = fair.lock().await.unwrap();
    let waiter = FairLock::new(&other, &name).unwrap();
    assert!(
        waiter
            .try_lock_with(AcquireOptions::new().with_wait(Duration::from_millis(100)))
            .await
            .unwrap()
            .is_none()
    );
    guard.unlock().await.unwrap();

    let spin = SpinLock::new(&client, &unique_name("ttl-spin")).unwrap();
    spin.lock().await.unwrap().unlock().await.unwrap();

    let name = unique_name("ttl-rw");
    let rw = ReadWriteLock::new(&client, &name).unwrap();
    let read = rw.read_lock().lock().await.unwrap();
    let writer = ReadWriteLock::new(&other, &name).unwrap();
    let writing = tokio::spawn(async move {
        writer
            .write_lock()
            .try_lock_with(soon)
            .await
            .unwrap()
            .unwrap()
            .unlock()
            .await
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    read.unlock().await.unwrap();
    writing.await.unwrap().unwrap();

    let name = unique_name("ttl-mutex");
    let mutex = Mutex::new(&client, &name).unwrap();
    let guard = mutex.lock().await.unwrap();
    let waiter = Mutex::new(&other, &name).unwrap();
    let waiting = tokio::spawn(async move { waiter.lock().await.unwrap().unlock().await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    guard.unlock().await.unwrap();
    waiting.await.unwrap().unwrap();

    // Every permit kind, the latch and the rate limiter: used, then deleted.
    let semaphore = Semaphore::new(&client, &unique_name("ttl-sem")).unwrap();
    assert!(semaphore.try_set_permits(2).await.unwrap());
    semaphore.acquire().await.unwrap().release().await.unwrap();
    assert!(semaphore.delete().await.unwrap());

    let expirable = ExpirableSemaphore::new(&client, &unique_name("ttl-exp")).unwrap();
    assert!(expirable.try_set_permits(2).await.unwrap());
    expirable.acquire().await.unwrap().release().await.unwrap();
    assert!(expirable.delete().await.unwrap());

    let latch = CountDownLatch::new(&client, &unique_name("ttl-latch")).unwrap();
    assert!(latch.try_set_count(2).await.unwrap());
    latch.count_down().await.unwrap();
    assert_eq!(
        latch.count_down_once("worker-1").await.unwrap(),
        ferrisson::CountDown::Counted(0)
    );
    assert!(latch.wait_for(SOON).await.unwrap());
    let _ = latch.delete().await.unwrap();

    let limiter = RateLimiter::new(&client, &unique_name("ttl-rate")).unwrap();
    limiter
        .set_rate(RateType::PerClient, 5, Duration::from_secs(1))
        .await
        .unwrap();
    assert!(limiter.try_acquire(2).await.unwrap());
    limiter.release(1).await.unwrap();
    assert!(limiter.delete().await.unwrap());

    // Objects given a TTL and left to expire: every key they made goes with them.
    let expirable = ExpirableSemaphore::new(&client, &unique_name("ttl-exp-expire")).unwrap();
    assert!(expirable.try_set_permits(2).await.unwrap());
    assert!(expirable.expire(Duration::from_secs(60)).await.unwrap());
    let held = expirable.acquire().await.unwrap();
    expirable.acquire().await.unwrap().release().await.unwrap();
    held.detach();
    let semaphore = Semaphore::new(&client, &unique_name("ttl-sem-expire")).unwrap();
    assert!(
        semaphore
            .try_set_permits_with_ttl(2, Duration::from_secs(60))
            .await
            .unwrap()
    );
    semaphore.acquire().await.unwrap().release().await.unwrap();
    let limiter = RateLimiter::new(&client, &unique_name("ttl-rate-keep")).unwrap();
    assert!(
        limiter
            .try_set_rate_with(
                ferrisson_rate_limiter::RateArgs::new(
                    RateType::PerClient,
                    5,
                    Duration::from_secs(1)
                )
                .keep_alive(Duration::from_secs(60))
            )
            .await
            .unwrap()
    );
    assert!(limiter.try_acquire(2).await.unwrap());
    limiter.release(1).await.unwrap();

    // What is left either goes by itself or is the layout's.
    let lasting = common::lasting_keys(&mut server.connection(), "*");
    assert!(lasting.is_empty(), "keys left without a TTL: {lasting:?}");
}

/// A mixed fleet on one fenced lock reads tokens alike: Redisson's `RFencedLock` `INCR`s the
/// counter ferrisson sets to the clock, and each side's token is above every earlier one
/// whoever issued it. After the counter is lost, Redisson's next token starts at 1 again (below
/// the tokens of before: docs/guarantees.md §9 says so) and ferrisson's at the clock, above them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_tokens_of_a_mixed_fleet_only_grow_while_the_counter_lives() {
    let redis = TestRedis::any();
    let client = client(&redis.url()).await;
    let name = unique_name("mixed-tokens");
    let lock = FencedLock::new(&client, &name).unwrap();
    let counter = format!("redisson_lock_token:{{{name}}}");
    let mut con = redis.connection();
    // Redisson's acquisition on a fresh counter: 1, 2, 3 …
    let redisson_first: u64 = con.incr(&counter, 1).unwrap();
    assert_eq!(redisson_first, 1);
    let guard = lock.lock().await.unwrap();
    let ours = guard.token();
    guard.unlock().await.unwrap();
    assert!(ours > redisson_first, "the clock floor: {ours}");
    let redissons: u64 = con.incr(&counter, 1).unwrap();
    assert_eq!(redissons, ours + 1, "Redisson's INCR keeps growing ours");
    let guard = lock.lock().await.unwrap();
    let next = guard.token();
    guard.unlock().await.unwrap();
    assert!(next > redissons);
    // The counter lost: Redisson's INCR starts over, ferrisson's token does not.
    let _: i64 = con.del(&counter).unwrap();
    let after_loss: u64 = con.incr(&counter, 1).unwrap();
    assert_eq!(after_loss, 1, "Redisson restarts at 1");
    let guard = lock.lock().await.unwrap();
    assert!(
        guard.token() > next,
        "ferrisson's token stays above the tokens of before"
    );
    guard.unlock().await.unwrap();
}
