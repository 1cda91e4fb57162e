//! `uncontended`: lock + unlock on distinct keys, one client, 1 / 64 / 256 tasks: the reentrant
//! lock (Redisson's layout), the lean mutex (the standard Redlock layout) and rslock in
//! alternating rounds, beside the Redisson layout's bare calls.

use std::time::Duration;

use ferrisson::{Client, Mutex as LeanMutex, ReentrantLock};
use rslock::LockManager;

use super::raw::{CEILING, CEILING_LIBRARY};
use super::rslock_peer::{self, RslockCycle};
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

const RAW: &str = super::raw::RAW_LIBRARY;

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
    records.push(
        "uncontended",
        variant,
        library,
        "client_allocs_per_op",
        run.allocs_per_cycle(),
        "allocs",
    );
}

/// Rounds per variant: raw and ferrisson alternate, so that both see the same machine, and the
/// ratios are the medians of the per-round ratios (these machines are noisy: a drift hits both
/// sides of a round alike, and an outlier round does not move a median).
fn rounds(ctx: &Ctx) -> (u32, Duration) {
    ctx.pick(
        (12, Duration::from_millis(500)),
        (6, Duration::from_millis(250)),
        (2, Duration::from_millis(100)),
    )
}

pub(crate) fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

/// The commands the Redlock layout's clients send for a lock + unlock (the lean mutex and
/// rslock: a plain `SET`, a release script), whose `usec` in `INFO commandstats` is the
/// server's time for their pairs. (Not for the Redisson layout, whose scripts' own `SET`s would
/// count twice.)
pub const REDLOCK_LAYOUT_COMMANDS: [&str; 3] = ["set", "evalsha", "eval"];

/// One round of a library: its run, the server's CPU time during it in seconds, and the
/// microseconds Redis spent in [`REDLOCK_LAYOUT_COMMANDS`].
async fn round_of(
    ctx: &Ctx,
    cycles: Vec<Box<dyn Cycle>>,
    round: Duration,
) -> Result<(workload::RunResult, f64, f64), String> {
    let before = ctx.probe.server_cpu().await?;
    let usec_before = ctx.probe.command_usec(&REDLOCK_LAYOUT_COMMANDS).await?;
    let result = workload::run(cycles, round, Duration::ZERO).await?;
    let cpu = (ctx.probe.server_cpu().await? - before).max(0.0);
    let usec = (ctx.probe.command_usec(&REDLOCK_LAYOUT_COMMANDS).await? - usec_before).max(0.0);
    Ok((result, cpu, usec))
}

/// A library's figures over the rounds: its merged run, the server's CPU and its time in
/// [`REDLOCK_LAYOUT_COMMANDS`].
#[derive(Default)]
struct Side {
    run: workload::RunResult,
    server_cpu: f64,
    command_usec: f64,
}

impl Side {
    /// Adds a round; its ops/s and the commands' µs per op.
    fn add(&mut self, (run, cpu, usec): (workload::RunResult, f64, f64)) -> (f64, f64) {
        let per_sec = run.per_sec();
        let usec_per_op = usec / run.total().max(1) as f64;
        self.run.merge(run);
        self.server_cpu += cpu;
        self.command_usec += usec;
        (per_sec, usec_per_op)
    }

    fn record(&mut self, records: &mut Records, variant: &str, library: &str) {
        push_run(records, variant, library, &mut self.run);
        records.push(
            "uncontended",
            variant,
            library,
            "server_cpu_us_per_op",
            self.server_cpu * 1e6 / self.run.total().max(1) as f64,
            "us",
        );
        if library != "ferrisson" && library != RAW {
            records.push(
                "uncontended",
                variant,
                library,
                "command_us_per_op",
                self.command_usec / self.run.total().max(1) as f64,
                "us",
            );
        }
        if let Some(ceiling) = records.get("raw", CEILING, CEILING_LIBRARY, "ops_per_sec") {
            let ops = self.run.per_sec();
            records.push(
                "uncontended",
                variant,
                library,
                "ratio_to_server_ceiling",
                ops / ceiling.max(1e-9),
                "x",
            );
        }
    }
}

/// Lock + unlock cycles of `n` tasks of `client`, each on a lock of its own, `<prefix>:<i>`:
/// the uncontended workload.
pub fn lock_cycles(client: &Client, prefix: &str, n: usize) -> Result<Vec<Box<dyn Cycle>>, String> {
    kind_cycles(client, prefix, n, ReentrantLock::new)
}

/// As [`lock_cycles`], for the lock kind `make` makes.
fn kind_cycles<L: workload::Acquire>(
    client: &Client,
    prefix: &str,
    n: usize,
    make: impl Fn(&Client, &str) -> ferrisson::Result<L>,
) -> Result<Vec<Box<dyn Cycle>>, String> {
    (0..n)
        .map(|i| {
            make(client, &format!("{prefix}:{i}"))
                .map(|lock| Box::new(HoldCycle(lock)) as Box<dyn Cycle>)
                .map_err(|e| e.to_string())
        })
        .collect()
}

pub async fn run(ctx: &Ctx, records: &mut Records) -> Result<(), String> {
    let client = Client::connect(&ctx.url).await.map_err(|e| e.to_string())?;
    let (rounds, round) = rounds(ctx);
    let mutex = super::lock_kinds::MUTEX;
    for (variant, tasks) in UNCONTENDED {
        let (mut raw, mut ours, mut lean, mut theirs, mut bare) = (
            Side::default(),
            Side::default(),
            Side::default(),
            Side::default(),
            Side::default(),
        );
        let (mut ops_ratios, mut p50_ratios) = (Vec::new(), Vec::new());
        let (mut rslock_ratios, mut rslock_p50_ratios) = (Vec::new(), Vec::new());
        let (mut mutex_ratios, mut mutex_p50_ratios, mut mutex_usec_ratios) =
            (Vec::new(), Vec::new(), Vec::new());
        // The mutex layout's bare calls against rslock: the mutex's ceiling.
        let (mut bare_ratios, mut bare_p50_ratios, mut bare_usec_ratios) =
            (Vec::new(), Vec::new(), Vec::new());
        // The mutex against its layout's bare calls, round by round.
        let mut mutex_bare_ratios = Vec::new();
        // The bare calls against rslock, round by round: what the layout lets any client reach.
        let (mut raw_rslock, mut raw_rslock_p50) = (Vec::new(), Vec::new());
        let manager = LockManager::new(vec![ctx.url.clone()]);
        for r in 0..rounds {
            let cycles = super::raw::raw_cycles(&ctx.url, variant, tasks).await?;
            let raw_round = round_of(ctx, cycles, round).await?;
            let cycles = lock_cycles(&client, &format!("bench:uncontended:{variant}"), tasks)?;
            let mutex_cycles = kind_cycles(
                &client,
                &format!("bench:uncontended-mutex:{variant}"),
                tasks,
                LeanMutex::new,
            )?;
            let bare_cycles = super::raw::raw_mutex_cycles(&ctx.url, variant, tasks).await?;
            let rslock_cycles = (0..tasks)
                .map(|i| {
                    Box::new(RslockCycle {
                        manager: manager.clone(),
                        resource: format!("bench:rslock:{variant}:{i}").into_bytes(),
                    }) as Box<dyn Cycle>
                })
                .collect();
            // Each of the three goes first in its turn, so that none always follows raw.
            let mut sides = workload::in_rotation(
                r as usize,
                vec![
                    Box::pin(round_of(ctx, cycles, round)),
                    Box::pin(round_of(ctx, mutex_cycles, round)),
                    Box::pin(round_of(ctx, rslock_cycles, round)),
                    Box::pin(round_of(ctx, bare_cycles, round)),
                ],
            )
            .await?
            .into_iter();
            let (
                Some(mut our_round),
                Some(mut mutex_round),
                Some(mut their_round),
                Some(mut bare_round),
            ) = (sides.next(), sides.next(), sides.next(), sides.next())
            else {
                return Err("a round came back short".to_owned());
            };
            bare_p50_ratios
                .push(bare_round.0.cycles.percentile(50.0) / p50_of(&their_round.0).max(1.0));
            let (raw_p50, our_p50, mutex_p50, their_p50) = (
                p50_of(&raw_round.0),
                our_round.0.cycles.percentile(50.0),
                mutex_round.0.cycles.percentile(50.0),
                their_round.0.cycles.percentile(50.0),
            );
            p50_ratios.push(our_p50 / raw_p50.max(1.0));
            rslock_p50_ratios.push(our_p50 / their_p50.max(1.0));
            mutex_p50_ratios.push(mutex_p50 / their_p50.max(1.0));
            raw_rslock_p50.push(raw_p50 / their_p50.max(1.0));
            let (raw_ops, _) = raw.add(raw_round);
            let (our_ops, _) = ours.add(std::mem::take(&mut our_round));
            let (mutex_ops, mutex_usec) = lean.add(std::mem::take(&mut mutex_round));
            let (their_ops, their_usec) = theirs.add(std::mem::take(&mut their_round));
            let (bare_ops, bare_usec) = bare.add(std::mem::take(&mut bare_round));
            bare_ratios.push(bare_ops / their_ops.max(1e-9));
            bare_usec_ratios.push(bare_usec / their_usec.max(1e-9));
            ops_ratios.push(our_ops / raw_ops.max(1e-9));
            rslock_ratios.push(our_ops / their_ops.max(1e-9));
            mutex_ratios.push(mutex_ops / their_ops.max(1e-9));
            mutex_bare_ratios.push(mutex_ops / bare_ops.max(1e-9));
            mutex_usec_ratios.push(mutex_usec / their_usec.max(1e-9));
            raw_rslock.push(raw_ops / their_ops.max(1e-9));
        }
        raw.record(records, variant, RAW);
        let lib = "ferrisson";
        ours.record(records, variant, lib);
        lean.record(records, variant, mutex);
        theirs.record(records, variant, rslock_peer::LIBRARY);
        let bare_lib = super::raw::RAW_MUTEX_LIBRARY;
        bare.record(records, variant, bare_lib);
        for (library, metric, values) in [
            (lib, "ratio_to_raw", ops_ratios),
            (lib, "p50_ratio_to_raw", p50_ratios),
            (lib, "ratio_to_rslock", rslock_ratios),
            (lib, "p50_ratio_to_rslock", rslock_p50_ratios),
            (mutex, "ratio_to_rslock", mutex_ratios),
            (mutex, "p50_ratio_to_rslock", mutex_p50_ratios),
            (mutex, "command_us_ratio_to_rslock", mutex_usec_ratios),
            (mutex, "ratio_to_bare_calls", mutex_bare_ratios),
            (bare_lib, "ratio_to_rslock", bare_ratios),
            (bare_lib, "p50_ratio_to_rslock", bare_p50_ratios),
            (bare_lib, "command_us_ratio_to_rslock", bare_usec_ratios),
            (RAW, "ratio_to_rslock", raw_rslock),
            (RAW, "p50_ratio_to_rslock", raw_rslock_p50),
        ] {
            records.push("uncontended", variant, library, metric, median(values), "x");
        }
        ctx.probe.flushall().await?;
    }
    ctx.probe.flushall().await
}

fn p50_of(run: &workload::RunResult) -> f64 {
    let mut cycles = run.cycles.clone();
    cycles.percentile(50.0)
}
