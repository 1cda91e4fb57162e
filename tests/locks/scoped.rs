//! The scoped form of every lock kind and of both semaphores (`with`): acquire, run the work
//! while held, release, return the output; a loss cuts the work off with `LeaseLost`.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use ferrisson::{
    AcquireOptions, Client, Error, ExpirableSemaphore, FairLock, Hold, Lock, LossReason,
    ReadWriteLock, ReentrantLock, Semaphore, SpinLock, SyncObject,
};

const SOON: Duration = Duration::from_secs(10);

/// Two `with`s joined in one task exclude each other, each returns its work's output, and
/// the lock is free afterwards.
async fn scoped<L: Lock>(lock: L, kind: &str) {
    let inside = AtomicUsize::new(0);
    let most = AtomicUsize::new(0);
    let work = |n: u32| {
        let (inside, most) = (&inside, &most);
        move |_| async move {
            let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(50)).await;
            inside.fetch_sub(1, Ordering::SeqCst);
            n * 10
        }
    };
    let (a, b) = tokio::join!(lock.with(work(1)), lock.with(work(2)));
    assert_eq!((a.unwrap(), b.unwrap()), (10, 20), "{kind}");
    assert_eq!(most.load(Ordering::SeqCst), 1, "{kind}: one at a time");
    assert!(!lock.is_locked().await.unwrap(), "{kind}: released");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_lock_kind_runs_scoped_work_one_at_a_time_and_releases() {
    let redis = TestRedis::any();
    let c = client(&redis.url()).await;
    let name = |k: &str| unique_name(&format!("scoped-{k}"));
    scoped(ReentrantLock::new(&c, &name("lock")).unwrap(), "lock").await;
    scoped(FairLock::new(&c, &name("fair")).unwrap(), "fair lock").await;
    scoped(SpinLock::new(&c, &name("spin")).unwrap(), "spin lock").await;
    scoped(ferrisson::Mutex::new(&c, &name("mutex")).unwrap(), "mutex").await;
    let rw = ReadWriteLock::new(&c, &name("rw")).unwrap();
    scoped(rw.write_lock(), "write lock").await;
    // Readers share: both run at once.
    let read = rw.read_lock();
    let both = Arc::new(AtomicUsize::new(0));
    let work = || {
        let both = both.clone();
        move |_| async move {
            both.fetch_add(1, Ordering::SeqCst);
            while both.load(Ordering::SeqCst) < 2 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    };
    let (a, b) = tokio::time::timeout(SOON, async {
        tokio::join!(read.with(work()), read.with(work()))
    })
    .await
    .unwrap();
    a.unwrap();
    b.unwrap();
    assert!(!rw.is_locked().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_hold_cuts_the_work_off_and_a_timeout_never_runs_it() {
    let redis = TestRedis::any();
    // A short lease: the watchdog finds a forced unlock within a third of it.
    let c = client_with_lease(&redis.url(), Duration::from_secs(1)).await;
    let lock = ReentrantLock::new(&c, &unique_name("scoped-loss")).unwrap();
    let finished = AtomicBool::new(false);
    let started = tokio::time::Instant::now();
    let out = lock
        .with_options(
            AcquireOptions::new().with_lease(Duration::from_millis(300)),
            |_| async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                finished.store(true, Ordering::SeqCst);
            },
        )
        .await;
    assert!(
        matches!(out, Err(Error::LeaseLost(LossReason::LeaseExpired))),
        "{out:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "cut off at the loss"
    );
    assert!(!finished.load(Ordering::SeqCst), "the work was dropped");

    // Forced open while the work runs: cut off too.
    let c2 = client(&redis.url()).await;
    let forced = ReentrantLock::new(&c2, lock.key()).unwrap();
    let out = tokio::join!(
        lock.with(|_| async { tokio::time::sleep(Duration::from_secs(60)).await }),
        async {
            eventually(SOON, "the work holds the lock", || async {
                forced.is_locked().await.unwrap()
            })
            .await;
            assert!(forced.force_unlock().await.unwrap());
        }
    )
    .0;
    assert!(matches!(out, Err(Error::LeaseLost(_))), "{out:?}");

    let held = forced.lock().await.unwrap();
    let ran = AtomicBool::new(false);
    let out = lock
        .with_options(
            AcquireOptions::new().with_wait(Duration::from_millis(100)),
            |_| async { ran.store(true, Ordering::SeqCst) },
        )
        .await;
    assert!(matches!(out, Err(Error::Timeout(_))), "{out:?}");
    assert!(!ran.load(Ordering::SeqCst), "no lock, no work");
    held.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphores_bound_scoped_work_and_give_every_permit_back() {
    let redis = TestRedis::any();
    let url = redis.url();
    let clients: Vec<Client> = futures::future::join_all((0..3).map(|_| client(&url))).await;
    let name = unique_name("scoped-sem");
    assert!(
        Semaphore::new(&clients[0], &name)
            .unwrap()
            .try_set_permits(2)
            .await
            .unwrap()
    );
    let expirable = unique_name("scoped-exp");
    assert!(
        ExpirableSemaphore::new(&clients[0], &expirable)
            .unwrap()
            .try_set_permits(2)
            .await
            .unwrap()
    );
    // Per kind: the calls inside now, and the most ever.
    let counters: [(Arc<AtomicUsize>, Arc<AtomicUsize>); 2] = Default::default();
    let mut tasks = Vec::new();
    for i in 0..16 {
        let client = clients[i % 3].clone();
        let (name, expirable) = (name.clone(), expirable.clone());
        let (inside, most) = counters[i % 2].clone();
        tasks.push(tokio::spawn(async move {
            let work = |_| async {
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(20)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                i
            };
            let out = if i % 2 == 0 {
                Semaphore::new(&client, &name).unwrap().with(work).await
            } else {
                ExpirableSemaphore::new(&client, &expirable)
                    .unwrap()
                    .with(work)
                    .await
            };
            assert_eq!(out.unwrap(), i);
        }));
    }
    for t in tasks {
        tokio::time::timeout(SOON, t).await.unwrap().unwrap();
    }
    for (kind, (_, most)) in ["semaphore", "expirable semaphore"].iter().zip(&counters) {
        let most = most.load(Ordering::SeqCst);
        assert!(
            (1..=2).contains(&most),
            "{kind}: {most} at once with 2 permits"
        );
    }
    let plain = Semaphore::new(&clients[0], &name).unwrap();
    assert_eq!(plain.available_permits().await.unwrap(), 2);
    let exp = ExpirableSemaphore::new(&clients[0], &expirable).unwrap();
    assert_eq!(exp.available_permits().await.unwrap(), 2);

    // An expirable permit lost under the work (its semaphore deleted) cuts the work off.
    let short = client_with_lease(&redis.url(), Duration::from_millis(600)).await;
    let exp = ExpirableSemaphore::new(&short, &expirable).unwrap();
    let out = tokio::join!(
        exp.with(|_| async { tokio::time::sleep(Duration::from_secs(60)).await }),
        async {
            eventually(SOON, "the work holds a permit", || async {
                exp.acquired_permits().await.unwrap() == 1
            })
            .await;
            assert!(exp.delete().await.unwrap());
        }
    )
    .0;
    assert!(matches!(out, Err(Error::LeaseLost(_))), "{out:?}");
}

/// The work gets its hold: a fenced lock's token (growing from one `with` to the next, and
/// stamped `(token, 1)`, `(token, 2)` for several writes), an unfenced kind's none, and the
/// loss signal, which fires when the lock is forced open while `ensure_held` turns to
/// `LeaseLost`, so that work can stop in its own way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_work_gets_its_token_and_its_loss_signal() {
    let redis = TestRedis::any();
    let c = client_with_lease(&redis.url(), Duration::from_secs(1)).await;
    let fenced = ReentrantLock::fenced(&c, &unique_name("scoped-token")).unwrap();
    let stamps = |hold: ferrisson::Hold| async move {
        let token = hold.token().unwrap();
        assert_eq!(hold.stamp(), Some((token, 1)));
        assert_eq!(
            hold.clone().stamp(),
            Some((token, 2)),
            "clones share the sequence"
        );
        hold.ensure_held().unwrap();
        token
    };
    let first = fenced.with(stamps).await.unwrap();
    let second = fenced.with(stamps).await.unwrap();
    assert!(second > first, "{second} after {first}");
    let plain = ReentrantLock::new(&c, &unique_name("scoped-plain")).unwrap();
    let none = plain
        .with(|hold| async move { hold.stamp() })
        .await
        .unwrap();
    assert_eq!(none, None);

    // Forced open under the work: `with` reports the loss, and the hold the work got tells it
    // too (its signal, `ensure_held`, `is_lost`), so that work can stop in its own way.
    let c2 = client(&redis.url()).await;
    let forced = ReentrantLock::new(&c2, plain.key()).unwrap();
    let slot = Mutex::new(None);
    let (out, ()) = tokio::join!(plain.with(keeping(&slot)), async {
        eventually(SOON, "the work holds the lock", || async {
            forced.is_locked().await.unwrap()
        })
        .await;
        assert!(forced.force_unlock().await.unwrap());
    });
    told_of_loss(out, &slot).await;

    // A plain semaphore's permit has no lease: its hold is never lost and has no token; an
    // expirable permit's is lost when the semaphore is deleted under it.
    let sem = Semaphore::new(&c, &unique_name("scoped-sem-hold"))
        .unwrap()
        .with_limit(1)
        .unwrap();
    let (token, lost) = sem
        .with(|hold| async move { (hold.token(), hold.is_lost()) })
        .await
        .unwrap();
    assert_eq!((token, lost), (None, false));
    let exp = ExpirableSemaphore::new(&c, &unique_name("scoped-exp-hold"))
        .unwrap()
        .with_limit(1)
        .unwrap();
    let deleter = ExpirableSemaphore::new(&c2, exp.key()).unwrap();
    let (out, ()) = tokio::join!(exp.with(keeping(&slot)), async {
        eventually(SOON, "the work holds a permit", || async {
            deleter.available_permits().await.unwrap() == 0
        })
        .await;
        assert!(deleter.delete().await.unwrap());
    });
    told_of_loss(out, &slot).await;
}

/// Work that keeps its hold in `slot` and runs until it is cut off.
fn keeping(
    slot: &Mutex<Option<Hold>>,
) -> impl FnOnce(Hold) -> std::future::Pending<()> + Send + '_ {
    move |hold| {
        *slot.lock().unwrap() = Some(hold);
        std::future::pending()
    }
}

/// `with` ended in `LeaseLost`, and the hold its work kept in `slot` was told: its loss
/// signal resolved with `NotHeld`, `ensure_held` fails and `is_lost` says so.
async fn told_of_loss(out: ferrisson::Result<()>, slot: &Mutex<Option<Hold>>) {
    assert!(matches!(out, Err(Error::LeaseLost(_))), "{out:?}");
    let hold = slot.lock().unwrap().take().expect("the work got its hold");
    let reason = tokio::time::timeout(SOON, hold.lost()).await.unwrap();
    assert_eq!(reason, LossReason::NotHeld);
    assert!(
        matches!(
            hold.ensure_held(),
            Err(Error::LeaseLost(LossReason::NotHeld))
        ),
        "{hold:?}"
    );
    assert!(hold.is_lost());
}

/// A MultiLock's work gets the group's hold: the largest token of its fenced locks, and the
/// group's loss signal, which fires when one of its locks is forced open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multilock_s_work_gets_the_group_s_token_and_loss() {
    let redis = TestRedis::any();
    let c = client_with_lease(&redis.url(), Duration::from_secs(1)).await;
    let name = unique_name("scoped-multi");
    let a = ReentrantLock::fenced(&c, &format!("{name}:a")).unwrap();
    let b = ReentrantLock::new(&c, &format!("{name}:b")).unwrap();
    let multi = ferrisson::MultiLock::new(vec![Box::new(a.clone()), Box::new(b.clone())]).unwrap();
    let token = multi
        .with(|hold| async move { hold.token() })
        .await
        .unwrap();
    assert!(token.is_some_and(|t| t > 0), "{token:?}");

    let c2 = client(&redis.url()).await;
    let forced = ReentrantLock::new(&c2, b.key()).unwrap();
    let slot = Mutex::new(None);
    let (out, ()) = tokio::join!(multi.with(keeping(&slot)), async {
        eventually(SOON, "the work holds the locks", || async {
            forced.is_locked().await.unwrap()
        })
        .await;
        assert!(forced.force_unlock().await.unwrap());
    });
    told_of_loss(out, &slot).await;
    // Cut off, the guard releases in the background.
    eventually(SOON, "the group's other lock given back", || async {
        !a.is_locked().await.unwrap()
    })
    .await;
}
