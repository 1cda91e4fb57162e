//! `foreign`: hand-offs from another Redlock client to a ferrisson `Mutex` waiter.
//!
//! rslock holds the lock (its `SET NX PX` and its compare-and-delete release, as redis-py's
//! `Lock` and npm `redlock` do: `crates/ferrisson-interop` checks those two wake the waiter the
//! same way), a ferrisson waiter waits, and rslock releases after a hold. Measured per
//! hand-off: the time from rslock's release (before it is sent) to the waiter's hold, and the
//! commands the waiter sent while rslock held (its tries: `SET`, `EVALSHA`, counted by
//! `INFO commandstats`, beside the one try that arms tracking and the one that gets in). With
//! tracked waits (`ClientConfig::with_tracked_waits`, on by default) Redis tells the waiter of
//! the release; off, the waiter re-checks every 100 to 200 ms, as before.

use std::time::Duration;

use ferrisson::{AcquireOptions, Client, ClientConfig, Lock, Mutex};
use tokio::time::Instant;

use super::Ctx;
use crate::record::Records;
use crate::stats::Latencies;

/// How long rslock holds before it releases: a few of the untracked waiter's re-checks.
const HOLD: Duration = Duration::from_millis(250);

pub async fn run(ctx: &Ctx, records: &mut Records) -> Result<(), String> {
    let handoffs = if ctx.quick { 40 } else { 200 };
    for (variant, tracked) in [("tracked", true), ("re-check", false)] {
        let config = ClientConfig::new(ctx.url.clone())
            .with_tracked_waits(tracked)
            .with_client_record(false);
        let client = Client::with_config(config)
            .await
            .map_err(|e| e.to_string())?;
        let name = format!("bench:foreign:{variant}");
        let mutex = Mutex::new(&client, &name).map_err(|e| e.to_string())?;
        // Loads the scripts: the counted hand-offs need no EVAL.
        mutex
            .lock()
            .await
            .map_err(|e| e.to_string())?
            .unlock()
            .await
            .map_err(|e| e.to_string())?;
        let manager = rslock::LockManager::new(vec![ctx.url.clone()]);
        let mut latencies = Latencies::default();
        let mut tries_while_held = 0u64;
        let missed_before = client.tracking_stats().missed;
        for _ in 0..handoffs {
            let lock = manager
                .lock(name.as_bytes(), Duration::from_secs(30))
                .await
                .map_err(|e| format!("rslock: {e:?}"))?;
            let waiter = {
                let mutex = mutex.clone();
                tokio::spawn(async move {
                    let guard = mutex
                        .try_lock_with(AcquireOptions::new().with_wait(Duration::from_secs(30)))
                        .await;
                    (Instant::now(), guard)
                })
            };
            // The waiter's first tries (the plain `SET`, then the one that arms tracking or
            // marks) are made by then; what it sends afterwards is polling.
            tokio::time::sleep(Duration::from_millis(20)).await;
            let before = ctx.probe.command_calls().await?;
            tokio::time::sleep(HOLD).await;
            let during = ctx.probe.command_calls().await?;
            tries_while_held += delta(&before, &during, "evalsha") + delta(&before, &during, "set");
            let released = Instant::now();
            manager.unlock(&lock).await;
            let (taken_at, guard) = waiter.await.map_err(|e| e.to_string())?;
            let guard = guard
                .map_err(|e| e.to_string())?
                .ok_or("the waiter timed out")?;
            latencies.record(taken_at.saturating_duration_since(released));
            guard.unlock().await.map_err(|e| e.to_string())?;
        }
        let n = handoffs as f64;
        let v = variant;
        records.push(
            "foreign",
            v,
            "ferrisson",
            "handoff_us",
            latencies.percentile(50.0),
            "us",
        );
        records.push(
            "foreign",
            v,
            "ferrisson",
            "handoff_p99_us",
            latencies.percentile(99.0),
            "us",
        );
        records.push(
            "foreign",
            v,
            "ferrisson",
            "tries_while_held",
            tries_while_held as f64 / n,
            "cmd",
        );
        let missed = client.tracking_stats().missed - missed_before;
        records.push(
            "foreign",
            v,
            "ferrisson",
            "missed_wakeups",
            missed as f64,
            "n",
        );
        client.shutdown().await.map_err(|e| e.to_string())?;
    }
    ctx.probe.flushall().await
}

fn delta(
    before: &std::collections::HashMap<String, u64>,
    after: &std::collections::HashMap<String, u64>,
    command: &str,
) -> u64 {
    let get = |m: &std::collections::HashMap<String, u64>| m.get(command).copied().unwrap_or(0);
    get(after).saturating_sub(get(before))
}
