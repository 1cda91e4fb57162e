//! `uncontended`: lock + unlock on distinct keys, one client, 1 / 64 / 256 tasks.

use std::time::Duration;

use ferrisson::{Client, ReentrantLock};
use tokio::time::Instant;

use super::{Ctx, UNCONTENDED};
use crate::record::Records;
use crate::workload::{self, BoxFuture, Cycle};

pub struct FerrissonCycle(pub ReentrantLock);

impl Cycle for FerrissonCycle {
    fn cycle(&self, hold: Duration) -> BoxFuture<'_, Result<Duration, String>> {
        Box::pin(async move {
            let t0 = Instant::now();
            let guard = self.0.lock().await.map_err(|e| e.to_string())?;
            let waited = t0.elapsed();
            workload::hold_for(hold).await?;
            guard.unlock().await.map_err(|e| e.to_string())?;
            Ok(waited)
        })
    }
}

/// Records ops/s, p50 and p99 of one uncontended run, and their ratios to the `raw` ceiling.
pub fn record_uncontended(
    records: &mut Records,
    variant: &str,
    library: &str,
    ops: f64,
    p50: f64,
    p99: f64,
) {
    records.push("uncontended", variant, library, "ops_per_sec", ops, "ops/s");
    records.push("uncontended", variant, library, "p50_us", p50, "us");
    records.push("uncontended", variant, library, "p99_us", p99, "us");
    if let Some(raw) = records.get("raw", variant, "redis-rs", "ops_per_sec") {
        records.push(
            "uncontended",
            variant,
            library,
            "ratio_to_raw",
            ops / raw,
            "x",
        );
    }
    if let Some(raw) = records.get("raw", variant, "redis-rs", "p50_us") {
        records.push(
            "uncontended",
            variant,
            library,
            "p50_ratio_to_raw",
            p50 / raw.max(1.0),
            "x",
        );
    }
}

/// As [`record_uncontended`], from an in-process run.
pub fn record_run(
    records: &mut Records,
    variant: &str,
    library: &str,
    result: &mut workload::RunResult,
) {
    let (p50, p99) = (
        result.cycles.percentile(50.0),
        result.cycles.percentile(99.0),
    );
    record_uncontended(records, variant, library, result.per_sec(), p50, p99);
}

pub async fn run(ctx: &Ctx, records: &mut Records) -> Result<(), String> {
    let client = Client::connect(&ctx.url).await.map_err(|e| e.to_string())?;
    for (variant, tasks) in UNCONTENDED {
        let cycles = (0..tasks)
            .map(|i| {
                ReentrantLock::new(&client, &format!("bench:uncontended:{variant}:{i}"))
                    .map(|lock| Box::new(FerrissonCycle(lock)) as Box<dyn Cycle>)
                    .map_err(|e| e.to_string())
            })
            .collect::<Result<Vec<_>, _>>()?;
        // One warm-up cycle loads the scripts.
        cycles[0].cycle(Duration::ZERO).await?;
        let mut result = workload::run(cycles, ctx.phase(), Duration::ZERO).await?;
        record_run(records, variant, "ferrisson", &mut result);
    }
    ctx.probe.flushall().await
}
