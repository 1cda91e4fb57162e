//! Deadlines at the server's resolution: a hold (a lock, a permit, a rate limiter's window)
//! never ends on the server before its holder's deadline for it, for every kind whose holds
//! end by themselves.
//!
//! The server's clock reads whole milliseconds, while a holder's deadline is its send time plus
//! the lease at the client's (microsecond) resolution. A kind that stores an expiry in data
//! (the permit-expirable semaphore's permits, the rate limiter's window) and frees it once the
//! millisecond clock reaches it could free it up to a millisecond early; keys with a PX (every
//! lock kind) expire only once the clock is past it. Each test here is a contender polling at
//! the boundary: many lanes in parallel, 1,000 holds in all per kind, each taken the moment the
//! previous one ends. A hold taken (its reply received) before the previous holder's deadline
//! is a second holder while the first still believes it holds.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common;

use std::future::Future;
use std::time::Duration;

use common::*;
use ferrisson::{AcquireOptions, Client, ClientConfig, Lock, ReentrantLock};
use ferrisson_expirable_semaphore::ExpirableSemaphore;
use ferrisson_fair_lock::FairLock;
use ferrisson_rate_limiter::{RateLimiter, RateType};
use ferrisson_rwlock::ReadWriteLock;
use tokio::time::Instant;

/// Holds in all, per kind.
const HOLDS: usize = 1_000;
/// Lanes (objects) polled at once: few enough that each polls tightly on two cores (25 lanes
/// caught the millisecond-early frees of the unfixed scripts 1-2 times in 1,000, 10 lanes 10-13).
const LANES: usize = 10;
/// The fixed lease of each hold (and the rate limiter's interval).
const LEASE: Duration = Duration::from_millis(25);
/// How long before the previous holder's deadline the contender starts polling.
const EARLY: Duration = Duration::from_millis(3);

/// What the polling found over every lane.
#[derive(Debug, Default)]
struct Outcome {
    holds: usize,
    /// Holds taken before the previous holder's deadline, by how much.
    early: Vec<Duration>,
}

/// Runs `LANES` lanes of `HOLDS / LANES` holds each. `take(lane, n)` is one try of hold `n` of
/// lane `lane`: `Some(deadline)` when it took the hold, with the holder's own deadline for it
/// (keeping the hold until then without releasing it). Each lane polls from `EARLY` before the
/// previous hold's deadline until its next try takes the hold, and notes a hold taken while
/// the previous holder's deadline had not passed.
async fn poll_at_the_boundary<F, Fut>(take: F) -> Outcome
where
    F: Fn(usize, usize) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Option<Instant>> + Send,
{
    let per_lane = HOLDS / LANES;
    let lanes: Vec<_> = (0..LANES)
        .map(|lane| {
            let take = take.clone();
            tokio::spawn(async move {
                let mut outcome = Outcome::default();
                let mut previous: Option<Instant> = None;
                for n in 0..=per_lane {
                    if let Some(deadline) = previous {
                        tokio::time::sleep_until(deadline - EARLY).await;
                    }
                    let give_up = Instant::now()
                        .checked_add(Duration::from_secs(5))
                        .expect("a deadline 5 s from now");
                    let deadline = loop {
                        if let Some(deadline) = take(lane, n).await {
                            break deadline;
                        }
                        assert!(
                            Instant::now() < give_up,
                            "lane {lane}: hold {n} never came free"
                        );
                    };
                    let taken = Instant::now();
                    if let Some(before) = previous {
                        if taken < before {
                            outcome.early.push(before - taken);
                        }
                        outcome.holds += 1;
                    }
                    previous = Some(deadline);
                }
                outcome
            })
        })
        .collect();
    let mut all = Outcome::default();
    for lane in join_within(Duration::from_secs(120), "every lane", lanes).await {
        all.holds += lane.holds;
        all.early.extend(lane.early);
    }
    all
}

fn check(kind: &str, outcome: &Outcome) {
    assert_eq!(outcome.holds, HOLDS, "{kind}: every hold was taken");
    assert!(
        outcome.early.is_empty(),
        "{kind}: {} of {} holds were taken before the previous holder's deadline (by up to {:?}): two holders at once",
        outcome.early.len(),
        outcome.holds,
        outcome.early.iter().max()
    );
}

async fn boundary_client(url: &str) -> Client {
    Client::with_config(ClientConfig::new(url).with_lease(Duration::from_secs(5)))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expirable_permit_is_never_freed_before_its_holders_deadline() {
    let redis = TestRedis::any();
    let client = boundary_client(&redis.url()).await;
    let name = unique_name("deadline-permit");
    let semaphores: Vec<ExpirableSemaphore> = (0..LANES)
        .map(|lane| {
            ExpirableSemaphore::new(&client, &format!("{name}:{lane}"))
                .unwrap()
                .with_limit(1)
                .unwrap()
        })
        .collect();
    let outcome = poll_at_the_boundary(move |lane, _| {
        let semaphore = semaphores[lane].clone();
        async move {
            let permit = semaphore
                .try_acquire_with(AcquireOptions::new().with_lease(LEASE))
                .await
                .unwrap()?;
            // A reply slower than the lease (a busy machine) gives a permit already lost,
            // with no deadline: no hold here, the lane polls on (as `lock_once`).
            let deadline = permit.lease_deadline();
            // Kept until its lease ends on the server: never released.
            permit.detach();
            deadline
        }
    })
    .await;
    check("expirable semaphore", &outcome);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limiters_permit_never_comes_back_before_a_whole_interval() {
    let redis = TestRedis::any();
    let client = boundary_client(&redis.url()).await;
    let name = unique_name("deadline-rate");
    let mut limiters = Vec::new();
    for lane in 0..LANES {
        let limiter = RateLimiter::new(&client, &format!("{name}:{lane}")).unwrap();
        assert!(
            limiter
                .try_set_rate(RateType::Overall, 1, LEASE)
                .await
                .unwrap()
        );
        limiters.push(limiter);
    }
    // A permit taken at the server between the try's send and its reply is back a whole
    // interval after it was given, so no sooner than the send time plus the interval.
    let outcome = poll_at_the_boundary(move |lane, _| {
        let limiter = limiters[lane].clone();
        async move {
            let sent = Instant::now();
            limiter
                .try_acquire(1)
                .await
                .unwrap()
                .then_some(sent + LEASE)
        }
    })
    .await;
    check("rate limiter", &outcome);
}

/// One try of a lock with a fixed lease: the deadline of the hold taken, kept until then. A
/// reply slower than the lease (a busy machine) gives a guard already lost, with no deadline:
/// its holder never believed it held, so it is no hold here, and the lane polls on.
async fn lock_once(lock: &impl Lock) -> Option<Instant> {
    let options = AcquireOptions::new()
        .with_wait(Duration::ZERO)
        .with_lease(LEASE);
    let guard = lock.try_lock_with(options).await.unwrap()?;
    let deadline = guard.lease_deadline();
    guard.detach();
    deadline
}

/// The boundary test of a lock kind whose holds are taken one after the other on each lane's
/// lock, made by `make(client, name)`.
async fn lock_boundary<L: Lock + Clone + 'static>(kind: &str, make: fn(&Client, &str) -> L) {
    let redis = TestRedis::any();
    let client = boundary_client(&redis.url()).await;
    let name = unique_name("deadline-lock");
    let locks: Vec<L> = (0..LANES)
        .map(|lane| make(&client, &format!("{name}:{lane}")))
        .collect();
    let outcome = poll_at_the_boundary(move |lane, _| {
        let lock = locks[lane].clone();
        async move { lock_once(&lock).await }
    })
    .await;
    check(kind, &outcome);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_is_never_taken_before_its_holders_deadline() {
    lock_boundary("reentrant lock", |client, name| {
        ReentrantLock::new(client, name).unwrap()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_lock_is_never_taken_before_its_holders_deadline() {
    lock_boundary("fair lock", |client, name| {
        FairLock::new(client, name).unwrap()
    })
    .await;
}

/// Read holds (each with a lease key of its own, and the hash's TTL the longest of them) and
/// write holds, in turn: a writer never gets in before a reader's deadline, nor a reader before
/// a writer's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_write_lock_side_is_never_taken_before_the_other_sides_deadline() {
    let redis = TestRedis::any();
    let client = boundary_client(&redis.url()).await;
    let name = unique_name("deadline-rw");
    let locks: Vec<ReadWriteLock> = (0..LANES)
        .map(|lane| ReadWriteLock::new(&client, &format!("{name}:{lane}")).unwrap())
        .collect();
    let outcome = poll_at_the_boundary(move |lane, n| {
        let lock = locks[lane].clone();
        async move {
            if n % 2 == 0 {
                lock_once(&lock.read_lock()).await
            } else {
                lock_once(&lock.write_lock()).await
            }
        }
    })
    .await;
    check("read-write lock", &outcome);
}
