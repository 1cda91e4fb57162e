//! One hold of every synchronizer, and a waiter behind each: for tests that put waiters through
//! a fault (a slot migration, a failover) and check that each still gets what it waits for.

use std::time::Duration;

use ferrisson::{Client, HoldGuard, Lock, Mutex, ReentrantLock};
use ferrisson_expirable_semaphore::{ExpirableSemaphore, Permit};
use ferrisson_fair_lock::FairLock;
use ferrisson_latch::CountDownLatch;
use ferrisson_rwlock::ReadWriteLock;
use ferrisson_semaphore::{Permits, Semaphore};
use tokio::task::JoinHandle;

/// The names of one object of each kind.
#[derive(Debug, Clone)]
pub struct KindNames {
    pub lock: String,
    pub mutex: String,
    pub fair: String,
    pub rw: String,
    pub semaphore: String,
    pub expirable: String,
    pub latch: String,
}

impl KindNames {
    /// Names under the hash tag of `tag` (`{x}:job`, so all in its slot), but for the latch,
    /// whose protocol channel allows no hash tag: `latch` is its name.
    pub fn tagged(tag: &str, latch: &str) -> Self {
        Self {
            lock: format!("{tag}:lock"),
            mutex: format!("{tag}:mutex"),
            fair: format!("{tag}:fair"),
            rw: format!("{tag}:rw"),
            semaphore: format!("{tag}:semaphore"),
            expirable: format!("{tag}:expirable"),
            latch: latch.to_owned(),
        }
    }

    /// Names no other test uses.
    pub fn unique(prefix: &str) -> Self {
        let name = |kind: &str| crate::common::unique_name(&format!("{prefix}-{kind}"));
        Self {
            lock: name("lock"),
            mutex: name("mutex"),
            fair: name("fair"),
            rw: name("rw"),
            semaphore: name("semaphore"),
            expirable: name("expirable"),
            latch: name("latch"),
        }
    }

    /// How many waiters (and channels) [`EveryKind::waiters`] starts.
    pub const KINDS: usize = 7;
}

/// A hold of each: the reentrant lock (fenced), the lean mutex (fenced), the fair lock, the write side of a read-write
/// lock, the only permit of a semaphore and of an expirable semaphore, a latch armed at 1.
pub struct EveryKind {
    lock: HoldGuard,
    mutex: HoldGuard,
    fair: ferrisson::HoldGuard,
    write: ferrisson::HoldGuard,
    permit: Permits,
    expirable: Permit,
    latch: CountDownLatch,
}

impl EveryKind {
    pub async fn hold(client: &Client, names: &KindNames) -> Self {
        let latch = CountDownLatch::new(client, &names.latch).unwrap();
        assert!(latch.try_set_count(1).await.unwrap());
        Self {
            lock: ReentrantLock::fenced(client, &names.lock)
                .unwrap()
                .lock()
                .await
                .unwrap(),
            mutex: Mutex::fenced(client, &names.mutex)
                .unwrap()
                .lock()
                .await
                .unwrap(),
            fair: FairLock::new(client, &names.fair)
                .unwrap()
                .lock()
                .await
                .unwrap(),
            write: ReadWriteLock::new(client, &names.rw)
                .unwrap()
                .write_lock()
                .lock()
                .await
                .unwrap(),
            permit: Semaphore::new(client, &names.semaphore)
                .unwrap()
                .with_limit(1)
                .unwrap()
                .acquire()
                .await
                .unwrap(),
            expirable: ExpirableSemaphore::new(client, &names.expirable)
                .unwrap()
                .with_limit(1)
                .unwrap()
                .acquire()
                .await
                .unwrap(),
            latch,
        }
    }

    /// A waiter on `client` behind each hold; the lock's checks that its fencing token is
    /// larger than the holder's.
    pub fn waiters(&self, client: &Client, names: &KindNames) -> Vec<JoinHandle<()>> {
        let held_token = self.lock.token().unwrap();
        let held_mutex_token = self.mutex.token().unwrap();
        let lock = ReentrantLock::fenced(client, &names.lock).unwrap();
        let mutex = Mutex::fenced(client, &names.mutex).unwrap();
        let fair = FairLock::new(client, &names.fair).unwrap();
        let rw = ReadWriteLock::new(client, &names.rw).unwrap();
        let semaphore = Semaphore::new(client, &names.semaphore).unwrap();
        let expirable = ExpirableSemaphore::new(client, &names.expirable).unwrap();
        let latch = CountDownLatch::new(client, &names.latch).unwrap();
        vec![
            tokio::spawn(async move {
                let guard = lock.lock().await.unwrap();
                assert!(guard.token().unwrap() > held_token, "tokens only grow");
                guard.unlock().await.unwrap();
            }),
            tokio::spawn(async move {
                let guard = mutex.lock().await.unwrap();
                assert!(
                    guard.token().unwrap() > held_mutex_token,
                    "tokens only grow"
                );
                guard.unlock().await.unwrap();
            }),
            tokio::spawn(async move { fair.lock().await.unwrap().unlock().await.unwrap() }),
            tokio::spawn(
                async move { rw.read_lock().lock().await.unwrap().unlock().await.unwrap() },
            ),
            tokio::spawn(async move { drop(semaphore.acquire().await.unwrap()) }),
            tokio::spawn(async move { drop(expirable.acquire().await.unwrap()) }),
            tokio::spawn(async move {
                assert!(
                    latch.wait_for(Duration::from_secs(60)).await.unwrap(),
                    "the latch opened for its waiter"
                );
            }),
        ]
    }

    /// The reentrant lock's guard (to check renewals and tokens).
    pub fn lock(&self) -> &HoldGuard {
        &self.lock
    }

    /// Releases every hold and opens the latch.
    pub async fn release(self) {
        self.lock.unlock().await.unwrap();
        self.mutex.unlock().await.unwrap();
        self.fair.unlock().await.unwrap();
        self.write.unlock().await.unwrap();
        self.permit.release().await.unwrap();
        self.expirable.release().await.unwrap();
        self.latch.count_down().await.unwrap();
    }
}

/// The reentrant lock of each of `names`, held by `client`.
pub async fn lock_all(client: &Client, names: &[String]) -> Vec<HoldGuard> {
    let mut guards = Vec::new();
    for name in names {
        guards.push(
            ReentrantLock::new(client, name)
                .unwrap()
                .lock()
                .await
                .unwrap(),
        );
    }
    guards
}

/// `per_name` tasks on `client` for each of `names`, each taking the lock once and giving it
/// back.
pub fn lock_waiters(client: &Client, names: &[String], per_name: usize) -> Vec<JoinHandle<()>> {
    let mut waiters = Vec::new();
    for name in names {
        for _ in 0..per_name {
            let lock = ReentrantLock::new(client, name).unwrap();
            waiters.push(tokio::spawn(async move {
                lock.lock().await.unwrap().unlock().await.unwrap();
            }));
        }
    }
    waiters
}
