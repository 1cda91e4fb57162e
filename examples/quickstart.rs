//! The reentrant lock in five minutes.
//!
//! ```text
//! cargo run --example quickstart                          # starts a throwaway redis-server
//! REDIS_URL=redis://127.0.0.1:6379 cargo run --example quickstart
//! REDIS_URL=redis-cluster://10.0.0.1:6379,10.0.0.2:6379 cargo run --example quickstart
//! REDIS_URL=redis-sentinel://10.0.0.1:26379,10.0.0.2:26379/mymaster cargo run --example quickstart
//! ```
//!
//! Pasted into an app of your own (as `src/main.rs`), it needs:
//!
//! ```toml
//! [dependencies]
//! ferrisson = { version = "0.1", features = ["dev"] }
//! tokio = { version = "1", features = ["macros", "rt-multi-thread", "time"] }
//! ```
#![allow(clippy::print_stdout)]

use std::time::Duration;

use ferrisson::dev::RedisServer;
use ferrisson::prelude::*;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Use the server at REDIS_URL (one server, a cluster or a Sentinel set-up: the URL says
    // which), or start a throwaway one (killed when `server` drops).
    let (server, url) = RedisServer::from_env_or_spawn()?;
    if server.is_some() {
        println!("started a throwaway redis-server at {url}");
    }

    let client = Client::connect(&url).await?;
    let lock = ReentrantLock::new(&client, "quickstart:monthly-report")?;

    // Take the lock. The watchdog keeps it for as long as we hold the guard.
    let guard = lock.lock().await?;
    println!("holding `{}` as {}", lock.key(), guard.owner());

    // Re-entry is explicit: a handle bound to the guard's owner re-enters; each hold is
    // released on its own. (A second `lock.lock()` would wait, as two tasks would.)
    let mine = lock.owned_by(guard.owner().clone());
    let inner = mine.lock().await?;
    println!("re-entered: hold count {}", mine.hold_count().await?);
    inner.unlock().await?;

    // Another task (or another process, or a Java service on Redisson) waits its turn.
    let other = lock.clone();
    let waiter = tokio::spawn(async move {
        let guard = other.lock().await?;
        println!("the second task got the lock once the first let go");
        guard.unlock().await
    });

    // Work under the lock, watching for its loss: if Redis loses the lock or renewals fail,
    // `lost()` fires before the lease can have run out, so the work stops in time.
    tokio::select! {
        reason = guard.lost() => return Err(format!("lock lost: {reason}").into()),
        () = tokio::time::sleep(Duration::from_millis(200)) => println!("report written"),
    }
    guard.unlock().await?;
    waiter.await??;

    // try_lock with a wait and a fixed lease: no watchdog, the lock ends by itself.
    let options = AcquireOptions::new()
        .with_wait(Duration::from_secs(1))
        .with_lease(Duration::from_secs(5));
    match lock.try_lock_with(options).await? {
        Some(guard) => {
            // `remaining_ttl` is `None` only when the key has no expiry (or is gone).
            let left = lock.remaining_ttl().await?.unwrap_or_default();
            println!(
                "took it for a fixed 5 s lease ({} ms left)",
                left.as_millis()
            );
            guard.unlock().await?;
        }
        None => println!("still busy after a second"),
    }

    // A fenced lock hands out a strictly increasing token with every acquisition.
    let fenced = FencedLock::new(&client, "quickstart:ledger")?;
    let first = fenced.lock().await?;
    let first_token = first.token();
    first.unlock().await?;
    let second = fenced.lock().await?;
    println!("fencing tokens {first_token} then {}", second.token());
    second.unlock().await?;

    println!(
        "done: `{}` is locked: {}",
        lock.key(),
        lock.is_locked().await?
    );

    // Last in main: guards dropped (not unlocked) release in the background, and a runtime
    // that ends with main would cut those releases short. Shutdown waits for them.
    client.shutdown().await?;
    Ok(())
}
