//! What ferrisson tells a production service: `tracing` spans and events, and metrics through
//! the `metrics` facade.
//!
//! ```text
//! cargo run -p ferrisson-examples --example observability
//! RUST_LOG=ferrisson_core=debug cargo run -p ferrisson-examples --example observability
//! ```
//!
//! It takes a lock that another task waits for, times a third one out, takes and gives back
//! semaphore permits, and lets a fixed lease run out under its holder; then it prints every
//! metric a recorder received. The log (stderr) shows the loss at `warn`, which a service keeps
//! on; `RUST_LOG=ferrisson_core=debug` adds the `ferrisson.acquire` / `ferrisson.release` spans
//! with their kind, key and owner.
//!
//! Pasted into an app of your own (as `src/main.rs`), it needs:
//!
//! ```toml
//! [dependencies]
//! ferrisson = { version = "0.1", features = ["dev", "lock", "semaphore", "metrics"] }
//! tokio = { version = "1", features = ["macros", "rt-multi-thread", "time"] }
//! tracing-subscriber = { version = "0.3", features = ["env-filter", "fmt"] }
//! metrics-util = { version = "0.20", default-features = false, features = ["debugging"] }
//! ```
#![allow(clippy::print_stdout)]

use std::time::Duration;

use ferrisson::Semaphore;
use ferrisson::dev::RedisServer;
use ferrisson::{AcquireOptions, Client, Lock, ReentrantLock};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("ferrisson_core=warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install()?;

    let (_server, url) = RedisServer::from_env_or_spawn()?;
    let client = Client::connect(&url).await?;

    // A lock another task waits for: an acquisition, a wait, a release (and the waiter's
    // acquisition after it).
    let lock = ReentrantLock::new(&client, "observability:report")?;
    let guard = lock.lock().await?;
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move {
            let guard = lock.lock().await?;
            guard.unlock().await
        })
    };
    // A third caller gives up after 50 ms: a timeout.
    let timed_out = lock
        .try_lock_with(AcquireOptions::new().with_wait(Duration::from_millis(50)))
        .await?;
    assert!(timed_out.is_none());
    guard.unlock().await?;
    waiter.await??;

    // Semaphore permits.
    let semaphore = Semaphore::new(&client, "observability:api-calls")?;
    semaphore.set_permits(2).await?;
    let permits = semaphore.acquire_many(2).await?;
    permits.release().await?;

    // A fixed lease that runs out while the holder still has its guard: a loss.
    let short = lock
        .lock_with(AcquireOptions::new().with_lease(Duration::from_millis(100)))
        .await?;
    let reason = short.lost().await;
    println!("the holder was told: {reason}");
    drop(short);

    let mut lines: Vec<String> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let (kind, key) = (key.kind(), key.key());
            let labels: Vec<String> = key
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            let value = match value {
                DebugValue::Counter(n) => n.to_string(),
                DebugValue::Gauge(g) => g.into_inner().to_string(),
                DebugValue::Histogram(samples) => {
                    let n = samples.len();
                    let max = samples.iter().map(|s| s.into_inner()).fold(0.0, f64::max);
                    format!("{n} samples, max {:.1} ms", max * 1e3)
                }
            };
            format!("{kind:?} {}{{{}}} = {value}", key.name(), labels.join(","))
        })
        .collect();
    lines.sort();
    for line in &lines {
        println!("{line}");
    }
    for wanted in [
        "ferrisson_acquisitions_total",
        "ferrisson_wait_seconds",
        "ferrisson_timeouts_total",
        "ferrisson_losses_total",
    ] {
        assert!(
            lines.iter().any(|l| l.contains(wanted)),
            "no {wanted} recorded"
        );
    }
    client.shutdown().await?;
    Ok(())
}
