//! Every synchronizer through one import, `use ferrisson::prelude::*` (the `dev` tools named by
//! their path): each kind made, its scoped work run with what it passes in, and its object
//! calls (`exists`, `is_locked`, `delete`) made, against a real Redis.
//!
//! ```text
//! cargo run --example every_kind --features full          # starts a throwaway redis-server
//! REDIS_URL=redis://127.0.0.1:6379 cargo run --example every_kind --features full
//! ```
//!
//! Pasted into an app of your own (as `src/main.rs`), it needs:
//!
//! ```toml
//! [dependencies]
//! ferrisson = { version = "0.1", features = ["dev", "full"] }
//! tokio = { version = "1", features = ["macros", "rt-multi-thread"] }
//! ```
#![allow(clippy::print_stdout)]

use ferrisson::prelude::*;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// `Err(what)` unless `holds`.
fn ensure(holds: bool, what: &str) -> Result<(), BoxError> {
    if holds { Ok(()) } else { Err(what.into()) }
}

/// Any lock kind, through the prelude's traits alone: scoped work that reads its hold, then the
/// object calls.
async fn scoped_and_object(lock: &impl Lock) -> Result<(), BoxError> {
    let (held, token) = lock
        .with(|hold| async move { (hold.ensure_held().is_ok(), hold.token()) })
        .await?;
    ensure(held, "the work ran while the lock was held")?;
    ensure(!lock.is_locked().await?, "with released the lock")?;
    ensure(!lock.exists().await?, "a released lock leaves no key")?;
    lock.delete().await?;
    let token = token.map_or_else(|| "no fencing token".to_owned(), |t| format!("token {t}"));
    println!("{:<32} scoped work ran held ({token})", lock.key());
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let (server, url) = ferrisson::dev::RedisServer::from_env_or_spawn()?;
    if server.is_some() {
        println!("started a throwaway redis-server at {url}");
    }
    let client = Client::connect(&url).await?;
    let n = |kind: &str| format!("every-kind:{}:{kind}", std::process::id());

    scoped_and_object(&ReentrantLock::new(&client, &n("reentrant"))?).await?;
    scoped_and_object(&NonReentrantLock::new(&client, &n("non-reentrant"))?).await?;
    scoped_and_object(&Mutex::new(&client, &n("mutex"))?).await?;
    scoped_and_object(&FairLock::new(&client, &n("fair"))?).await?;
    scoped_and_object(&NonReentrantFairLock::new(&client, &n("nr-fair"))?).await?;
    scoped_and_object(&SpinLock::new(&client, &n("spin"))?).await?;
    let rw = ReadWriteLock::new(&client, &n("rw"))?;
    scoped_and_object(&rw.read_lock()).await?;
    scoped_and_object(&rw.write_lock()).await?;
    scoped_and_object(&FasterMultiLock::new(&client, &n("fml"), ["a", "b"])?).await?;

    // The fenced lock: its own calls give the token as a plain u64, a (token, sequence) stamp
    // for each write; generic code takes it as a `Lock`.
    let fenced = FencedLock::new(&client, &n("fenced"))?;
    let guard: FencedGuard = fenced.lock().await?;
    let token: u64 = guard.token();
    guard.unlock().await?;
    let (scoped, stamps) = fenced
        .with(|hold: FencedHold| async move { (hold.token(), (hold.stamp(), hold.stamp())) })
        .await?;
    ensure(scoped > token, "each acquisition's token is larger")?;
    ensure(
        stamps == ((scoped, 1), (scoped, 2)),
        "a hold's stamps count its writes",
    )?;
    scoped_and_object(&fenced).await?;
    let fenced_mutex = FencedMutex::new(&client, &n("fenced-mutex"))?;
    let mutex_token: u64 = fenced_mutex
        .with(|hold| async move { hold.token() })
        .await?;
    ensure(mutex_token > 0, "a fenced mutex hands out tokens")?;
    scoped_and_object(&fenced_mutex).await?;

    // Groups: all their locks at once, and a quorum of them.
    let multi = MultiLock::new(vec![
        Box::new(ReentrantLock::new(&client, &n("m1"))?),
        Box::new(ReentrantLock::new(&client, &n("m2"))?),
    ])?;
    let ran = multi
        .with(|hold| async move { hold.ensure_held().is_ok() })
        .await?;
    ensure(ran, "a multilock's work runs held")?;
    let red = RedLock::new(vec![Box::new(ReentrantLock::new(&client, &n("red"))?)])?;
    let held: MultiGuard = red.lock().await?;
    held.unlock().await?;
    println!(
        "{:<32} a multilock and a RedLock held and released",
        n("m1, m2, red")
    );

    // Semaphores: permits for the work, given back after it.
    let semaphore = Semaphore::new(&client, &n("sem"))?.with_limit(2)?;
    let left = semaphore
        .with(|_| async { semaphore.available_permits().await })
        .await??;
    ensure(left == 1, "one of two permits was taken for the work")?;
    ensure(semaphore.exists().await?, "a semaphore keeps its count")?;
    semaphore.delete().await?;
    let expirable = ExpirableSemaphore::new(&client, &n("exp"))?.with_limit(2)?;
    let permit: Permit = expirable.acquire().await?;
    permit.ensure_held()?;
    permit.release().await?;
    expirable
        .with(|hold| async move { hold.ensure_held() })
        .await??;
    expirable.delete().await?;
    println!(
        "{:<32} permits taken for work and given back",
        n("sem, exp")
    );

    // A latch that opens, and a rate limiter.
    let latch = CountDownLatch::new(&client, &n("latch"))?;
    ensure(latch.try_set_count(1).await?, "a new latch takes its count")?;
    latch.count_down().await?;
    ensure(
        !latch.exists().await?,
        "an open latch leaves nothing behind",
    )?;
    let rate = RateArgs::new(RateType::Overall, 5, std::time::Duration::from_secs(1));
    let limiter = RateLimiter::new(&client, &n("rate"))?.with_rate(rate)?;
    limiter.acquire(1).await?;
    ensure(limiter.delete().await?, "the limiter had state to delete")?;
    println!(
        "{:<32} a latch opened, a rate permit taken",
        n("latch, rate")
    );

    client.shutdown().await?;
    Ok(())
}
