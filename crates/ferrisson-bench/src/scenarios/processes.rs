//! Contention across processes (#35): the `contended` workload with each of its 4 clients in a
//! process of its own (this binary, run with `--worker`), as services are deployed, for the
//! reentrant lock, the spin lock, the read-write lock's writers and the lean `Mutex`, at 0 and
//! 1 ms holds. Reported per kind and hold: acquisitions/s, each client's share of the
//! acquisitions against its fair share (`process_share_min`, `process_share_max`: 1 is fair)
//! and the throughput against the same workload in one process
//! (`ratio_to_in_process`, medians of alternating rounds).

use std::process::Stdio;
use std::time::Duration;

use ferrisson::{Client, Mutex as LeanMutex, ReadWriteLock, ReentrantLock, SpinLock};
use tokio::io::AsyncReadExt;

use super::{CONTENDED_CLIENTS, CONTENDED_TASKS, Ctx, HOLDS, hold_variant};
use crate::record::Records;
use crate::workload::{self, Cycle, HoldCycle};

/// The kinds run across processes, by the name a worker takes.
const KINDS: [&str; 4] = ["reentrant-lock", "spin-lock", "write-lock", "mutex"];

/// The library name of a kind's records (the `contended` scenario's names).
fn library(kind: &str) -> &'static str {
    match kind {
        "reentrant-lock" => "ferrisson",
        "spin-lock" => "ferrisson-spin-lock",
        "write-lock" => "ferrisson-write-lock",
        _ => "ferrisson-mutex",
    }
}

/// `CONTENDED_TASKS` cycles of `kind` on `name`, over one client of `url`.
async fn client_cycles(url: &str, kind: &str, name: &str) -> Result<Vec<Box<dyn Cycle>>, String> {
    let client = Client::connect(url).await.map_err(|e| e.to_string())?;
    let mut cycles: Vec<Box<dyn Cycle>> = Vec::with_capacity(CONTENDED_TASKS);
    for _ in 0..CONTENDED_TASKS {
        let e = |e: ferrisson::Error| e.to_string();
        cycles.push(match kind {
            "reentrant-lock" => Box::new(HoldCycle(ReentrantLock::new(&client, name).map_err(e)?)),
            "spin-lock" => Box::new(HoldCycle(SpinLock::new(&client, name).map_err(e)?)),
            "write-lock" => Box::new(HoldCycle(
                ReadWriteLock::new(&client, name).map_err(e)?.write_lock(),
            )),
            "mutex" => Box::new(HoldCycle(LeanMutex::new(&client, name).map_err(e)?)),
            other => return Err(format!("unknown kind `{other}`")),
        });
    }
    Ok(cycles)
}

/// The worker process: `--worker KIND URL NAME HOLD_US PHASE_MS`. Runs one client's tasks until
/// the phase ends and prints `acquisitions <n>`.
pub async fn worker(args: &[String]) -> Result<(), String> {
    let [kind, url, name, hold_us, phase_ms] = args else {
        return Err("--worker KIND URL NAME HOLD_US PHASE_MS".into());
    };
    let parse = |s: &str| s.parse::<u64>().map_err(|e| format!("{s}: {e}"));
    let hold = Duration::from_micros(parse(hold_us)?);
    let phase = Duration::from_millis(parse(phase_ms)?);
    let cycles = client_cycles(url, kind, name).await?;
    let result = workload::run(cycles, phase, hold).await?;
    println!("acquisitions {}", result.total());
    Ok(())
}

/// One round across processes: each client's acquisitions (each worker runs for the phase,
/// once its client has connected).
async fn across_processes(
    ctx: &Ctx,
    kind: &str,
    name: &str,
    hold: Duration,
) -> Result<Vec<u64>, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let phase = ctx.phase();
    let mut children = Vec::new();
    for _ in 0..CONTENDED_CLIENTS {
        let child = tokio::process::Command::new(&exe)
            .arg("--worker")
            .arg(kind)
            .arg(&ctx.url)
            .arg(name)
            .arg(hold.as_micros().to_string())
            .arg(phase.as_millis().to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("starting a worker: {e}"))?;
        children.push(child);
    }
    let mut counts = Vec::new();
    for mut child in children {
        let mut out = String::new();
        if let Some(stdout) = child.stdout.as_mut() {
            stdout
                .read_to_string(&mut out)
                .await
                .map_err(|e| e.to_string())?;
        }
        let status = child.wait().await.map_err(|e| e.to_string())?;
        if !status.success() {
            return Err(format!("a {kind} worker failed ({status})"));
        }
        let count = out
            .lines()
            .find_map(|l| l.strip_prefix("acquisitions "))
            .and_then(|n| n.trim().parse::<u64>().ok())
            .ok_or_else(|| format!("a {kind} worker printed no count: {out:?}"))?;
        counts.push(count);
    }
    Ok(counts)
}

/// The same workload in this process: acquisitions per second.
async fn in_process(ctx: &Ctx, kind: &str, name: &str, hold: Duration) -> Result<f64, String> {
    let mut cycles = Vec::new();
    for _ in 0..CONTENDED_CLIENTS {
        cycles.extend(client_cycles(&ctx.url, kind, name).await?);
    }
    Ok(workload::run(cycles, ctx.phase(), hold).await?.per_sec())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

pub async fn run(ctx: &Ctx, records: &mut Records) -> Result<(), String> {
    // One round in quick mode: the smoke test runs every scenario once, inside CI's budget.
    let rounds = if ctx.quick { 1 } else { 3 };
    for kind in KINDS {
        for hold in HOLDS {
            let variant = format!("{},processes={CONTENDED_CLIENTS}", hold_variant(hold));
            let name = format!("bench:processes:{kind}:{}", hold_variant(hold));
            let (mut ratios, mut rates, mut share_min, mut share_max) =
                (Vec::new(), Vec::new(), f64::MAX, 0.0_f64);
            for round in 0..rounds {
                let (counts, here) = workload::in_turn(
                    round % 2 == 0,
                    across_processes(ctx, kind, &name, hold),
                    in_process(ctx, kind, &name, hold),
                )
                .await?;
                let total: u64 = counts.iter().sum();
                let fair = total as f64 / counts.len().max(1) as f64;
                for c in &counts {
                    share_min = share_min.min(*c as f64 / fair.max(1e-9));
                    share_max = share_max.max(*c as f64 / fair.max(1e-9));
                }
                let rate = total as f64 / ctx.phase().as_secs_f64().max(1e-9);
                rates.push(rate);
                ratios.push(rate / here.max(1e-9));
                ctx.probe.flushall().await?;
            }
            let lib = library(kind);
            let s = "contended";
            records.push(
                s,
                &variant,
                lib,
                "acquisitions_per_sec",
                median(rates),
                "acq/s",
            );
            records.push(s, &variant, lib, "process_share_min", share_min, "x");
            records.push(s, &variant, lib, "process_share_max", share_max, "x");
            records.push(s, &variant, lib, "ratio_to_in_process", median(ratios), "x");
        }
    }
    Ok(())
}
