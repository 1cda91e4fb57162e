//! `faster-multilock`: what a faster multi-lock's calls cost the server by how many values
//! they name, up to `MAX_VALUES`: the acquire, a renewal (`extend` runs the watchdog's script
//! on one hold) and the release, each the server's own time for the call (`INFO commandstats`
//! around it alone), the median of the rounds. Redis runs nothing else while a script runs:
//! these times bound `MAX_VALUES`.
//!
//! Then 100 values locked and unlocked in a loop, three ways in alternating rounds: a faster
//! multi-lock over the 100 values of one group, a `MultiLock` over 100 reentrant locks, and
//! 100 reentrant locks taken one after the other and released; each as pairs (all 100 taken
//! and released) per second and server CPU per value.

use std::time::Duration;

use ferrisson::{
    AcquireOptions, AnyLock, Client, FasterMultiLock, HoldGuard, Lock, MultiLock, ReentrantLock,
    Result,
};
use tokio::time::Instant;

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
    hundred(ctx, records, &client).await?;
    ctx.probe.flushall().await
}

/// How 100 values are taken and released at once.
#[derive(Clone, Copy)]
enum Way {
    Faster,
    Multi,
    Sequential,
}

impl Way {
    fn name(self) -> &'static str {
        match self {
            Way::Faster => "faster-multilock",
            Way::Multi => "multilock",
            Way::Sequential => "sequential-locks",
        }
    }
}

const VALUES: usize = 100;

/// One phase of `way`: all 100 values taken and released in a loop; pairs per second and
/// server CPU per value.
async fn phase(ctx: &Ctx, client: &Client, way: Way) -> Result<(f64, f64), String> {
    let err = |e: ferrisson::Error| e.to_string();
    let names: Vec<String> = (0..VALUES).map(|i| format!("bench:fml-{i}")).collect();
    let faster = FasterMultiLock::new(client, "bench:fml", &names).map_err(err)?;
    let locks: Vec<ReentrantLock> = names
        .iter()
        .map(|n| ReentrantLock::new(client, n))
        .collect::<Result<_>>()
        .map_err(err)?;
    let multi = MultiLock::new(
        locks
            .iter()
            .map(|l| Box::new(l.clone()) as Box<dyn AnyLock>)
            .collect(),
    )
    .map_err(err)?;
    let cpu = ctx.probe.server_cpu().await?;
    let started = Instant::now();
    let mut pairs = 0u64;
    // Shorter phases than other scenarios', in more rounds: each round's ratio compares ways
    // measured seconds apart, which this machine's drift over a minute does not blur.
    let length = ctx.pick(
        Duration::from_secs(2),
        Duration::from_millis(750),
        Duration::from_millis(300),
    );
    while started.elapsed() < length {
        match way {
            Way::Faster => pair(&faster).await.map_err(err)?,
            // A MultiLock is no `Lock` (its guard is a `MultiGuard`).
            Way::Multi => multi
                .lock()
                .await
                .map_err(err)?
                .unlock()
                .await
                .map_err(err)?,
            Way::Sequential => {
                let mut guards = Vec::with_capacity(VALUES);
                for lock in &locks {
                    guards.push(lock.lock().await.map_err(err)?);
                }
                for guard in guards {
                    guard.unlock().await.map_err(err)?;
                }
            }
        }
        pairs += 1;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = ctx.probe.server_cpu().await? - cpu;
    Ok((
        pairs as f64 / elapsed,
        cpu * 1e6 / (pairs as f64 * VALUES as f64),
    ))
}

/// One lock and unlock of `lock`.
async fn pair(lock: &impl Lock) -> Result<()> {
    lock.lock().await?.unlock().await
}

/// The three ways in alternating rounds; the median of each, and the median of the rounds'
/// ratios of the faster multi-lock to the `MultiLock` (#54's targets: pairs/s ≥ 20 ×, server
/// CPU per value ≤ ½).
async fn hundred(ctx: &Ctx, records: &mut Records, client: &Client) -> Result<(), String> {
    let ways = [Way::Faster, Way::Multi, Way::Sequential];
    let mut runs: Vec<(Vec<f64>, Vec<f64>)> = vec![(Vec::new(), Vec::new()); ways.len()];
    for round in 0..ctx.pick(7, 3, 1) {
        for i in 0..ways.len() {
            // Each round in another order, so that no way always runs first or last.
            let i = (i + round) % ways.len();
            let (ops, cpu) = phase(ctx, client, ways[i]).await?;
            runs[i].0.push(ops);
            runs[i].1.push(cpu);
        }
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
    };
    let ratios =
        |of: &[f64], to: &[f64]| -> Vec<f64> { of.iter().zip(to).map(|(a, b)| a / b).collect() };
    let [faster, multi, _] = runs.as_slice() else {
        return Err("the three ways' runs are missing".to_owned());
    };
    for (metric, ratio) in [
        ("pairs_per_s_ratio", median(ratios(&faster.0, &multi.0))),
        (
            "server_cpu_per_value_ratio",
            median(ratios(&faster.1, &multi.1)),
        ),
    ] {
        records.push(
            "faster-multilock",
            "values=100 faster-multilock / multilock",
            "ferrisson",
            metric,
            ratio,
            "x",
        );
    }
    for (way, (ops, cpu)) in ways.into_iter().zip(runs) {
        let variant = format!("values=100 {}", way.name());
        records.push(
            "faster-multilock",
            &variant,
            "ferrisson",
            "pairs_per_s",
            median(ops),
            "ops/s",
        );
        records.push(
            "faster-multilock",
            &variant,
            "ferrisson",
            "server_cpu_us_per_value",
            median(cpu),
            "us",
        );
    }
    Ok(())
}
