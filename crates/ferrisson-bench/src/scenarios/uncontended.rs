//! `uncontended`: lock + unlock on distinct keys, one client, 1 / 64 / 256 tasks.

use std::time::Duration;

use ferrisson::{Client, ReentrantLock};

use super::{Ctx, UNCONTENDED};
use crate::record::Records;
use crate::workload::{self, Cycle, HoldCycle};

/// Records ops/s, p50 and p99 of one uncontended run, and their ratios to the `raw` ceiling.
pub fn record_uncontended(
    records: &mut Records,
    variant: &str,
    library: &str,
    ops: f64,
    p50: f64,
    p99: f64,
) {
    push_figures(records, variant, library, ops, p50, p99);
    // The ceiling: raw calls measured in the same scenario (interleaved with ferrisson's
    // rounds), else the `raw` scenario's.
    let ceiling = |records: &Records, metric: &str| {
        records
            .get("uncontended", variant, RAW, metric)
            .or_else(|| records.get("raw", variant, RAW, metric))
    };
    if let Some(raw) = ceiling(records, "ops_per_sec") {
        records.push(
            "uncontended",
            variant,
            library,
            "ratio_to_raw",
            ops / raw,
            "x",
        );
    }
    if let Some(raw) = ceiling(records, "p50_us") {
        let ratio = p50 / raw.max(1.0);
        records.push(
            "uncontended",
            variant,
            library,
            "p50_ratio_to_raw",
            ratio,
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

const RAW: &str = "redis-rs";

/// Ops/s, p50 and p99 of a run.
fn push_figures(records: &mut Records, variant: &str, library: &str, ops: f64, p50: f64, p99: f64) {
    records.push("uncontended", variant, library, "ops_per_sec", ops, "ops/s");
    records.push("uncontended", variant, library, "p50_us", p50, "us");
    records.push("uncontended", variant, library, "p99_us", p99, "us");
}

/// As [`push_figures`], from a run's samples.
fn push_run(records: &mut Records, variant: &str, library: &str, run: &mut workload::RunResult) {
    let (p50, p99) = (run.cycles.percentile(50.0), run.cycles.percentile(99.0));
    push_figures(records, variant, library, run.per_sec(), p50, p99);
    records.push(
        "uncontended",
        variant,
        library,
        "client_cpu_us_per_op",
        run.cpu_us_per_cycle(),
        "us",
    );
}

/// Rounds per variant: raw and ferrisson alternate, so that both see the same machine, and the
/// ratios are the medians of the per-round ratios (these machines are noisy: a drift hits both
/// sides of a round alike, and an outlier round does not move a median).
fn rounds(ctx: &Ctx) -> (u32, Duration) {
    if ctx.quick {
        (6, Duration::from_millis(250))
    } else {
        (12, Duration::from_millis(500))
    }
}

pub(crate) fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

pub async fn run(ctx: &Ctx, records: &mut Records) -> Result<(), String> {
    let client = Client::connect(&ctx.url).await.map_err(|e| e.to_string())?;
    let (rounds, round) = rounds(ctx);
    for (variant, tasks) in UNCONTENDED {
        let mut raw = workload::RunResult::default();
        let mut ours = workload::RunResult::default();
        let (mut ops_ratios, mut p50_ratios) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            let cycles = super::raw::raw_cycles(&ctx.url, variant, tasks).await?;
            let mut raw_round = workload::run(cycles, round, Duration::ZERO).await?;
            let cycles = (0..tasks)
                .map(|i| {
                    ReentrantLock::new(&client, &format!("bench:uncontended:{variant}:{i}"))
                        .map(|lock| Box::new(HoldCycle(lock)) as Box<dyn Cycle>)
                        .map_err(|e| e.to_string())
                })
                .collect::<Result<Vec<_>, _>>()?;
            let mut our_round = workload::run(cycles, round, Duration::ZERO).await?;
            ops_ratios.push(our_round.per_sec() / raw_round.per_sec().max(1e-9));
            p50_ratios.push(
                our_round.cycles.percentile(50.0) / raw_round.cycles.percentile(50.0).max(1.0),
            );
            raw.merge(raw_round);
            ours.merge(our_round);
        }
        push_run(records, variant, RAW, &mut raw);
        let lib = "ferrisson";
        push_run(records, variant, lib, &mut ours);
        records.push(
            "uncontended",
            variant,
            lib,
            "ratio_to_raw",
            median(ops_ratios),
            "x",
        );
        records.push(
            "uncontended",
            variant,
            lib,
            "p50_ratio_to_raw",
            median(p50_ratios),
            "x",
        );
    }
    ctx.probe.flushall().await
}
