//! What a program that imports `ferrisson::prelude::*` alone (and names nothing else of the
//! crate) can do: make every kind and call its scoped and object methods, against a real
//! Redis. A missing trait or type in the prelude fails this file's build.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::time::Duration;

use crate::common;
use ferrisson::prelude::*;

/// A lock kind's scoped use and its object calls, through the prelude's traits alone.
async fn scoped_and_object(lock: &impl Lock) {
    assert_eq!(lock.with(|_| async { 7 }).await.unwrap(), 7);
    assert!(!lock.exists().await.unwrap(), "{} left behind", lock.key());
    assert!(!lock.is_locked().await.unwrap());
    assert!(!lock.delete().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_prelude_alone_makes_and_drives_every_kind() {
    let server = common::RedisServer::spawn();
    let client: Client = common::client(&server.url()).await;
    let name = common::unique_name("prelude");
    let n = |kind: &str| format!("{name}:{kind}");

    scoped_and_object(&ReentrantLock::new(&client, &n("reentrant")).unwrap()).await;
    scoped_and_object(&NonReentrantLock::new(&client, &n("non-reentrant")).unwrap()).await;
    scoped_and_object(&Mutex::new(&client, &n("mutex")).unwrap()).await;
    scoped_and_object(&FairLock::new(&client, &n("fair")).unwrap()).await;
    scoped_and_object(&NonReentrantFairLock::new(&client, &n("nr-fair")).unwrap()).await;
    scoped_and_object(&SpinLock::new(&client, &n("spin")).unwrap()).await;
    let rw = ReadWriteLock::new(&client, &n("rw")).unwrap();
    scoped_and_object(&rw.read_lock()).await;
    scoped_and_object(&rw.write_lock()).await;
    let values = ["a", "b"];
    scoped_and_object(&FasterMultiLock::new(&client, &n("fml"), values).unwrap()).await;

    let fenced = FencedLock::new(&client, &n("fenced")).unwrap();
    let guard: FencedGuard = fenced.lock().await.unwrap();
    let token: u64 = guard.token();
    assert!(token > 0);
    guard.unlock().await.unwrap();
    // Scoped, the token is a plain u64 too, and above the last one.
    let (scoped, stamp): (u64, (u64, u64)) = fenced
        .with(|hold: FencedHold| async move { (hold.token(), hold.stamp()) })
        .await
        .unwrap();
    assert!(scoped > token);
    assert_eq!(stamp, (scoped, 1));
    // Generic code takes it as a `Lock`: its hold's token is there.
    scoped_and_object(&fenced).await;
    fenced.delete().await.unwrap();
    assert!(!fenced.exists().await.unwrap());

    let multi = MultiLock::new(vec![
        Box::new(ReentrantLock::new(&client, &n("m1")).unwrap()),
        Box::new(ReentrantLock::new(&client, &n("m2")).unwrap()),
    ])
    .unwrap();
    assert_eq!(multi.with(|_| async { 8 }).await.unwrap(), 8);
    let red = RedLock::new(vec![Box::new(
        ReentrantLock::new(&client, &n("red")).unwrap(),
    )])
    .unwrap();
    let held: MultiGuard = red.lock().await.unwrap();
    held.unlock().await.unwrap();

    let semaphore = Semaphore::new(&client, &n("sem"))
        .unwrap()
        .with_limit(2)
        .unwrap();
    assert_eq!(semaphore.with(|_| async { 9 }).await.unwrap(), 9);
    assert!(semaphore.exists().await.unwrap());
    assert!(semaphore.delete().await.unwrap());
    let expirable = ExpirableSemaphore::new(&client, &n("exp"))
        .unwrap()
        .with_limit(2)
        .unwrap();
    let permit: Permit = expirable.acquire().await.unwrap();
    permit.release().await.unwrap();
    assert!(expirable.delete().await.unwrap());

    let latch = CountDownLatch::new(&client, &n("latch")).unwrap();
    assert!(latch.try_set_count(1).await.unwrap());
    latch.count_down().await.unwrap();
    assert!(
        !latch.exists().await.unwrap(),
        "an open latch leaves nothing behind"
    );

    let rate = RateArgs::new(RateType::Overall, 5, Duration::from_secs(1));
    let limiter = RateLimiter::new(&client, &n("rate"))
        .unwrap()
        .with_rate(rate)
        .unwrap();
    limiter.acquire(1).await.unwrap();
    assert!(limiter.delete().await.unwrap());

    let options: AcquireOptions = AcquireOptions::new().with_wait(Duration::ZERO);
    let owner: Option<Owner> = None;
    let lost: Option<LossReason> = None;
    let _: (AcquireOptions, Option<Owner>, Option<LossReason>) = (options, owner, lost);
    let _: fn(Error) -> Error = |e| e;
    let _: Option<HoldGuard> = None;
    let _: Option<ClientConfig> = None;
    client.shutdown().await.unwrap();
}
