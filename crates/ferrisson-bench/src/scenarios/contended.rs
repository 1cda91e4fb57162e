//! `contended`: one lock, 4 clients × 16 tasks, hold 0 and 1 ms.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ferrisson::{Client, ReentrantLock};

use super::{CONTENDED_CLIENTS, CONTENDED_TASKS, Ctx, HOLDS, hold_variant};
use crate::record::Records;
use crate::workload::{self, Cycle, HoldCycle};

/// What one library's contended run measured.
#[derive(Debug, Default)]
pub struct Figures {
    pub acquisitions_per_sec: f64,
    pub p50_wait_us: f64,
    pub p99_wait_us: f64,
    pub min_per_task: u64,
    pub max_per_task: u64,
    /// Acquisitions of the client that made the fewest and of the one that made the most (the
    /// cycles come client by client, `CONTENDED_TASKS` each): whether the unfairness is
    /// between clients or between one client's tasks.
    pub min_per_client: u64,
    pub max_per_client: u64,
    pub commands_per_acquisition: Option<f64>,
    /// The server's CPU time per acquisition in the steady window, in microseconds.
    pub server_cpu_us: Option<f64>,
    pub subscriber_connections: Option<usize>,
}

pub fn record(records: &mut Records, hold: Duration, library: &str, f: &Figures) {
    let variant = hold_variant(hold);
    let v = variant.as_str();
    records.push(
        "contended",
        v,
        library,
        "acquisitions_per_sec",
        f.acquisitions_per_sec,
        "acq/s",
    );
    records.push("contended", v, library, "p50_wait_us", f.p50_wait_us, "us");
    records.push("contended", v, library, "p99_wait_us", f.p99_wait_us, "us");
    records.push(
        "contended",
        v,
        library,
        "fairness_min",
        f.min_per_task as f64,
        "acq/task",
    );
    records.push(
        "contended",
        v,
        library,
        "fairness_max",
        f.max_per_task as f64,
        "acq/task",
    );
    if f.max_per_client > 0 {
        records.push(
            "contended",
            v,
            library,
            "fairness_client_min",
            f.min_per_client as f64,
            "acq/client",
        );
        records.push(
            "contended",
            v,
            library,
            "fairness_client_max",
            f.max_per_client as f64,
            "acq/client",
        );
    }
    if let Some(c) = f.commands_per_acquisition {
        records.push(
            "contended",
            v,
            library,
            "commands_per_acquisition",
            c,
            "cmd/acq",
        );
    }
    if let Some(c) = f.server_cpu_us {
        records.push(
            "contended",
            v,
            library,
            "server_cpu_us_per_acquisition",
            c,
            "us",
        );
    }
    if let Some(s) = f.subscriber_connections {
        records.push(
            "contended",
            v,
            library,
            "subscriber_connections",
            s as f64,
            "conn",
        );
    }
    // The serial ceiling: one lock is held by one owner at a time, so at best acquisitions
    // follow each other at the rate of a raw acquire + release pair, plus the hold time.
    if let Some(raw) = records.get("raw", "sequential", "redis-rs", "ops_per_sec") {
        let ceiling = 1.0 / (1.0 / raw + hold.as_secs_f64());
        records.push(
            "contended",
            v,
            library,
            "ratio_to_serial_ceiling",
            f.acquisitions_per_sec / ceiling,
            "x",
        );
    }
}

/// Runs an in-process library's cycles for one phase. Commands per acquisition and the
/// server's CPU per acquisition come from `INFO commandstats` and `INFO cpu` over the steady
/// middle half of the phase (start-up, first subscriptions and the last waiters' exits left
/// out), against the acquisitions made in that window.
pub async fn measure<F, Fut>(ctx: &Ctx, hold: Duration, make: F) -> Result<Figures, String>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<Vec<Box<dyn Cycle>>, String>>,
{
    measure_with(ctx, hold, &[], make).await
}

/// As [`measure`], for a library that also sends the plain commands `plain` (which its
/// scripts never run: rslock's `SET`).
pub async fn measure_with<F, Fut>(
    ctx: &Ctx,
    hold: Duration,
    plain: &[&str],
    make: F,
) -> Result<Figures, String>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<Vec<Box<dyn Cycle>>, String>>,
{
    let cycles = make().await?;
    let phase = ctx.phase();
    let done = Arc::new(AtomicU64::new(0));
    let sample = async {
        tokio::time::sleep(phase / 4).await;
        let (start, before) = (ctx.probe.snapshot().await?, done.load(Ordering::Relaxed));
        tokio::time::sleep(phase / 4).await;
        let subscribers = ctx.probe.subscriber_connections().await?;
        tokio::time::sleep(phase / 4).await;
        let (end, after) = (ctx.probe.snapshot().await?, done.load(Ordering::Relaxed));
        Ok::<_, String>((start, end, after.saturating_sub(before), subscribers))
    };
    let (result, sampled) = tokio::join!(
        workload::run_counted(cycles, phase, hold, done.clone()),
        sample
    );
    let mut result = result?;
    let (start, end, acquisitions, subscribers) = sampled?;
    let per_acquisition = |x: f64| x / acquisitions.max(1) as f64;
    let per_client: Vec<u64> = result
        .cycles_per_task
        .chunks(CONTENDED_TASKS)
        .map(|tasks| tasks.iter().sum())
        .collect();
    let figures = Figures {
        acquisitions_per_sec: result.per_sec(),
        p50_wait_us: result.waits.percentile(50.0),
        p99_wait_us: result.waits.percentile(99.0),
        min_per_task: result.cycles_per_task.iter().copied().min().unwrap_or(0),
        max_per_task: result.cycles_per_task.iter().copied().max().unwrap_or(0),
        min_per_client: per_client.iter().copied().min().unwrap_or(0),
        max_per_client: per_client.iter().copied().max().unwrap_or(0),
        subscriber_connections: Some(subscribers),
        commands_per_acquisition: Some(per_acquisition(start.client_commands(&end, plain) as f64)),
        server_cpu_us: Some(per_acquisition(end.cpu_since(&start) * 1e6)),
    };
    ctx.probe.flushall().await?;
    Ok(figures)
}

/// The contended workload with ferrisson's reentrant lock: 4 clients × 16 tasks on `name`.
pub async fn ferrisson_cycles(url: &str, name: &str) -> Result<Vec<Box<dyn Cycle>>, String> {
    let mut cycles: Vec<Box<dyn Cycle>> = Vec::new();
    for _ in 0..CONTENDED_CLIENTS {
        let client = Client::connect(url).await.map_err(|e| e.to_string())?;
        for _ in 0..CONTENDED_TASKS {
            let lock = ReentrantLock::new(&client, name).map_err(|e| e.to_string())?;
            cycles.push(Box::new(HoldCycle(lock)));
        }
    }
    Ok(cycles)
}

pub async fn run(ctx: &Ctx, records: &mut Records) -> Result<(), String> {
    for hold in HOLDS {
        let name = format!("bench:contended:{}", hold_variant(hold));
        let figures = measure(ctx, hold, || ferrisson_cycles(&ctx.url, &name)).await?;
        record(records, hold, "ferrisson", &figures);
    }
    Ok(())
}
