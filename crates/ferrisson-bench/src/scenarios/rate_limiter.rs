//! `rate-limiter`: permits granted per second against the configured rate (never above it in
//! any window), and how soon a waiter gets its permit after the window gives one back.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferrisson::{AcquireOptions, Client, RateLimiter, RateType};
use tokio::time::Instant;

use super::Ctx;
use crate::record::Records;

pub async fn run(ctx: &Ctx, records: &mut Records) -> Result<(), String> {
    let rate: u64 = 200;
    let interval = Duration::from_secs(1);
    let phase = ctx.pick(
        Duration::from_secs(6),
        Duration::from_millis(2_500),
        Duration::from_millis(1_200),
    );
    let name = "bench:rate-limiter";
    let setup = Client::connect(&ctx.url).await.map_err(|e| e.to_string())?;
    RateLimiter::new(&setup, name)
        .map_err(|e| e.to_string())?
        .set_rate(RateType::Overall, rate, interval)
        .await
        .map_err(|e| e.to_string())?;
    // 4 clients × 8 tasks taking one permit at a time, as fast as the limiter lets them.
    let grants = Arc::new(Mutex::new(Vec::new()));
    let started = Instant::now();
    let deadline = started
        .checked_add(phase)
        .ok_or("the phase's deadline is past the clock's range")?;
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let client = Client::connect(&ctx.url).await.map_err(|e| e.to_string())?;
        for _ in 0..8 {
            let limiter = RateLimiter::new(&client, name).map_err(|e| e.to_string())?;
            let grants = grants.clone();
            tasks.push(tokio::spawn(async move {
                loop {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Ok::<(), String>(());
                    }
                    if limiter
                        .try_acquire_with(1, AcquireOptions::new().with_wait(left))
                        .await
                        .map_err(|e| e.to_string())?
                    {
                        grants
                            .lock()
                            .map_err(|e| e.to_string())?
                            .push(Instant::now());
                    }
                }
            }));
        }
    }
    for task in tasks {
        task.await.map_err(|e| e.to_string())??;
    }
    let mut grants = grants.lock().map_err(|e| e.to_string())?.clone();
    grants.sort_unstable();
    let elapsed = phase.as_secs_f64();
    // Less 20 ms: a grant is stamped a moment after the server gave it.
    let window = interval.saturating_sub(Duration::from_millis(20));
    let most_in_window = grants
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let Some(end) = t.checked_add(window) else {
                return grants.len() - i;
            };
            grants[i..].iter().take_while(|u| **u < end).count()
        })
        .max()
        .unwrap_or(0);
    let v = format!("rate={rate}/s");
    records.push(
        "rate-limiter",
        &v,
        "ferrisson",
        "granted_per_sec",
        grants.len() as f64 / elapsed,
        "permits/s",
    );
    records.push(
        "rate-limiter",
        &v,
        "ferrisson",
        "most_in_any_window",
        most_in_window as f64,
        "permits",
    );
    records.push(
        "rate-limiter",
        &v,
        "ferrisson",
        "configured_rate",
        rate as f64,
        "permits",
    );

    // A window spent at once, then one waiter: how long after the window gives a permit back
    // does it have it?
    let limiter = RateLimiter::new(&setup, "bench:rate-limiter:open").map_err(|e| e.to_string())?;
    limiter
        .set_rate(RateType::Overall, 10, Duration::from_millis(200))
        .await
        .map_err(|e| e.to_string())?;
    let mut lateness = Vec::new();
    for _ in 0..ctx.pick(20, 5, 2) {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let spent = Instant::now();
        limiter.acquire(10).await.map_err(|e| e.to_string())?;
        limiter.acquire(1).await.map_err(|e| e.to_string())?;
        let late = spent.elapsed().saturating_sub(Duration::from_millis(200));
        lateness.push(late.as_secs_f64() * 1e6);
    }
    lateness.sort_by(f64::total_cmp);
    let p = |q: f64| lateness[((lateness.len() - 1) as f64 * q) as usize];
    records.push(
        "rate-limiter",
        "window-open",
        "ferrisson",
        "p50_late_us",
        p(0.5),
        "us",
    );
    records.push(
        "rate-limiter",
        "window-open",
        "ferrisson",
        "max_late_us",
        p(1.0),
        "us",
    );
    Ok(())
}
