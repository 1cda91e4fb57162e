//! `faster-multilock`: what a faster multi-lock's calls cost the server by how many values
//! they name, up to `MAX_VALUES`: the acquire, a renewal (`extend` runs the watchdog's script
//! on one hold) and the release, each the server's own time for the call (`INFO commandstats`
//! around it alone), the median of the rounds. Redis runs nothing else while a script runs:
//! these times bound `MAX_VALUES`.

use std::time::Duration;

use ferrisson::{AcquireOptions, Client, FasterMultiLock, HoldGuard, Lock, Result};

use super::Ctx;
use crate::record::Records;

pub async fn run(ctx: &Ctx, records: &mut Records) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let client = Client::connect(&ctx.url).await.map_err(|e| err(&e))?;
    let mut con = redis::Client::open(ctx.url.as_str())
        .map_err(|e| err(&e))?
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| err(&e))?;
    let lease = AcquireOptions::new().with_lease(Duration::from_secs(30));
    const MAX: usize = ferrisson_faster_multilock::MAX_VALUES;
    let sizes: &[usize] = ctx.pick(&[10, 100, MAX], &[10, MAX], &[10]);
    for &size in sizes {
        let values = (0..size).map(|i| format!("order-line-{i}"));
        let lock =
            FasterMultiLock::new(&client, "bench:faster-multilock", values).map_err(|e| err(&e))?;
        let mut times = [Vec::new(), Vec::new(), Vec::new()];
        // A first round loads the scripts, and is not counted.
        for round in 0..=ctx.pick(5, 3, 1) {
            let mut timed = Vec::new();
            let mut guard: Option<HoldGuard> = None;
            for op in 0..3 {
                let _: () = redis::cmd("CONFIG")
                    .arg("RESETSTAT")
                    .query_async(&mut con)
                    .await
                    .map_err(|e| err(&e))?;
                match op {
                    0 => guard = Some(lock.lock_with(lease).await.map_err(|e| err(&e))?),
                    1 => {
                        let held = guard.as_ref().ok_or("no guard")?;
                        held.extend(Duration::from_secs(30))
                            .await
                            .map_err(|e| err(&e))?;
                    }
                    _ => {
                        let held = guard.take().ok_or("no guard")?;
                        held.unlock().await.map_err(|e| err(&e))?;
                    }
                }
                let calls = ctx.probe.command_calls().await?;
                let usec = ctx.probe.command_usec(&["evalsha"]).await?;
                // Counted only when the call was the only script call meanwhile.
                timed.push((calls.get("evalsha") == Some(&1)).then_some(usec));
            }
            if round > 0 {
                for (op, usec) in timed.into_iter().enumerate() {
                    times[op].extend(usec);
                }
            }
        }
        for (op, mut us) in ["acquire", "renew", "release"].into_iter().zip(times) {
            us.sort_by(f64::total_cmp);
            let median = us.get(us.len() / 2).copied().unwrap_or(f64::NAN);
            let variant = format!("values={size}");
            let metric = format!("{op}_server_us");
            records.push(
                "faster-multilock",
                &variant,
                "ferrisson",
                &metric,
                median,
                "us",
            );
        }
    }
    ctx.probe.flushall().await
}
