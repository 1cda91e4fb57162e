//! `waiters`: 10,000 tasks of one client waiting on one lock, and in the full run 100,000.
//!
//! Measures the subscriber connections they use, the memory each costs, the commands Redis
//! receives per second while nothing changes, and the hand-off time from one unlock to the next
//! acquisition as the lock passes through all of them.

use ferrisson::Lock;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferrisson::{Client, ReentrantLock};
use tokio::time::Instant;

use super::Ctx;
use crate::record::Records;
use crate::stats::{Latencies, resident_bytes, total_calls};

/// The waiters of every run.
const WAITERS: usize = 10_000;

/// The waiters of the full run's second round, on one client.
const MANY_WAITERS: usize = 100_000;

pub async fn run(ctx: &Ctx, records: &mut Records) -> Result<(), String> {
    run_with(ctx, records, WAITERS).await?;
    if !ctx.quick {
        run_with(ctx, records, MANY_WAITERS).await?;
    }
    Ok(())
}

/// `waiters` tasks of one client wait on one lock held by another client, then it passes
/// through all of them.
async fn run_with(ctx: &Ctx, records: &mut Records, waiters: usize) -> Result<(), String> {
    let holder = Client::connect(&ctx.url).await.map_err(|e| e.to_string())?;
    let client = Client::connect(&ctx.url).await.map_err(|e| e.to_string())?;
    let name = "bench:waiters";
    let guard = ReentrantLock::new(&holder, name)
        .map_err(|e| e.to_string())?
        .lock()
        .await
        .map_err(|e| e.to_string())?;
    // Warm the waiting client's scripts and runtime before measuring memory.
    let warm = ReentrantLock::new(&client, "bench:waiters:warm").map_err(|e| e.to_string())?;
    warm.lock()
        .await
        .map_err(|e| e.to_string())?
        .unlock()
        .await
        .map_err(|e| e.to_string())?;

    let rss_before = resident_bytes();
    let heap_before = crate::live_heap_bytes();
    let handoffs: Arc<Mutex<Vec<(Instant, Instant)>>> =
        Arc::new(Mutex::new(Vec::with_capacity(waiters)));
    let mut tasks = Vec::with_capacity(waiters);
    for _ in 0..waiters {
        let lock = ReentrantLock::new(&client, name).map_err(|e| e.to_string())?;
        let handoffs = handoffs.clone();
        tasks.push(tokio::spawn(async move {
            let guard = lock.lock().await.map_err(|e| e.to_string())?;
            let acquired = Instant::now();
            let released = Instant::now();
            guard.unlock().await.map_err(|e| e.to_string())?;
            handoffs
                .lock()
                .map_err(|e| e.to_string())?
                .push((acquired, released));
            Ok::<_, String>(())
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while client.waiter_stats().1 < waiters {
        if Instant::now() > deadline {
            return Err(format!(
                "only {} of {waiters} waiters registered",
                client.waiter_stats().1
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Let every waiter finish the try that follows its subscription.
    let mut last = total_calls(&ctx.probe.command_calls().await?);
    loop {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let now = total_calls(&ctx.probe.command_calls().await?);
        if now == last {
            break;
        }
        if Instant::now() > deadline {
            return Err("the server never went quiet".into());
        }
        last = now;
    }
    let rss_after = resident_bytes();
    let heap_after = crate::live_heap_bytes();
    let subscribers = ctx.probe.subscriber_connections().await?;

    let idle = ctx.pick(
        Duration::from_secs(3),
        Duration::from_secs(1),
        Duration::from_millis(300),
    );
    let before = total_calls(&ctx.probe.command_calls().await?);
    tokio::time::sleep(idle).await;
    let after = total_calls(&ctx.probe.command_calls().await?);
    let idle_per_sec = after.saturating_sub(before) as f64 / idle.as_secs_f64();

    let released = Instant::now();
    guard.unlock().await.map_err(|e| e.to_string())?;
    for task in tasks {
        task.await.map_err(|e| e.to_string())??;
    }
    let all_through = released.elapsed();
    let mut times = std::mem::take(&mut *handoffs.lock().map_err(|e| e.to_string())?);
    times.sort_by_key(|(acquired, _)| *acquired);
    let mut gaps = Latencies::default();
    let mut previous_release = released;
    for (acquired, released) in times {
        gaps.record(acquired.saturating_duration_since(previous_release));
        previous_release = released;
    }

    let v = format!("waiters={waiters}");
    let v = v.as_str();
    records.push(
        "waiters",
        v,
        "ferrisson",
        "subscriber_connections",
        subscribers as f64,
        "conn",
    );
    records.push(
        "waiters",
        v,
        "ferrisson",
        "idle_commands_per_sec",
        idle_per_sec,
        "cmd/s",
    );
    // What waiting costs: heap held by the waiters (their tasks, futures, subscriptions, the
    // user's lock handles), measured by the counting allocator...
    let per_waiter = (heap_after - heap_before).max(0) as f64 / waiters as f64;
    records.push(
        "waiters",
        v,
        "ferrisson",
        "bytes_per_waiter",
        per_waiter,
        "B",
    );
    // ...and the growth of the resident set, which also keeps the high-water mark of the
    // ramp-up (every waiter's acquire call in flight at once) that the allocator does not
    // return to the system.
    if let (Some(before), Some(after)) = (rss_before, rss_after) {
        let per_waiter = after.saturating_sub(before) as f64 / waiters as f64;
        records.push(
            "waiters",
            v,
            "ferrisson",
            "rss_bytes_per_waiter",
            per_waiter,
            "B",
        );
    }
    records.push(
        "waiters",
        v,
        "ferrisson",
        "handoff_us",
        gaps.percentile(50.0),
        "us",
    );
    records.push(
        "waiters",
        v,
        "ferrisson",
        "handoff_p99_us",
        gaps.percentile(99.0),
        "us",
    );
    records.push(
        "waiters",
        v,
        "ferrisson",
        "all_through_ms",
        all_through.as_secs_f64() * 1e3,
        "ms",
    );
    ctx.probe.flushall().await
}
