//! Contention across processes (#35): the `contended` workload with each of its 4 clients in a
//! process of its own (this binary, run with `--worker`), as services are deployed, for the
//! reentrant lock, the spin lock, the read-write lock's writers, the lean `Mutex` and `RedLock`
//! over 3 servers (of reentrant locks, and of mutexes), at 0 and 1 ms holds; and, outside quick
//! mode, the RedLocks again with 20 ms holds while one of the 3 servers is down (a process once
//! waited 30 s there while the others took turns). Reported per kind and hold: acquisitions/s, each client's
//! share of the acquisitions against its fair share (`process_share_min`,
//! `process_share_max`: 1 is fair), the longest acquire (`max_wait_ms`) and the throughput
//! against the same workload in one process (`ratio_to_in_process`, medians of alternating
//! rounds).

use std::process::Stdio;
use std::time::Duration;

use ferrisson::{Client, FairLock, Mutex as LeanMutex, ReadWriteLock, ReentrantLock, SpinLock};
use tokio::io::AsyncReadExt;

use super::{CONTENDED_CLIENTS, CONTENDED_TASKS, Ctx, HOLDS, hold_variant};
use crate::record::Records;
use crate::workload::{self, Cycle, HoldCycle};

/// The kinds run across processes, by the name a worker takes.
pub const KINDS: [&str; 6] = [
    "reentrant-lock",
    "spin-lock",
    "write-lock",
    "mutex",
    "redlock",
    "redlock-mutex",
];

/// The kinds also run with two tasks per process (#52): a process's two tasks hand the lock
/// to each other, and the others must still get their turns.
pub const TWO_TASK_KINDS: [&str; 3] = ["reentrant-lock", "mutex", "fair-lock"];

/// Tasks per process of the two-task variant.
pub const FEW_TASKS: usize = 2;

/// The RedLocks' long holds while one of their servers is down.
const OUTAGE_HOLD: Duration = Duration::from_millis(20);

/// The library name of a kind's records (the `contended` scenario's names).
pub fn library(kind: &str) -> &'static str {
    match kind {
        "reentrant-lock" => "ferrisson",
        "spin-lock" => "ferrisson-spin-lock",
        "write-lock" => "ferrisson-write-lock",
        "redlock" => "ferrisson-redlock",
        "redlock-mutex" => "ferrisson-redlock-mutex",
        "fair-lock" => "ferrisson-fair-lock",
        _ => "ferrisson-mutex",
    }
}

/// `tasks` cycles of `kind` on `name`, over one client of `url` (a RedLock: one client of each
/// of the comma-separated URLs).
async fn client_cycles(
    url: &str,
    kind: &str,
    name: &str,
    tasks: usize,
) -> Result<Vec<Box<dyn Cycle>>, String> {
    if let Some(mutexes) = match kind {
        "redlock" => Some(false),
        "redlock-mutex" => Some(true),
        _ => None,
    } {
        let urls: Vec<String> = url.split(',').map(str::to_owned).collect();
        let clients = super::redlock::clients(&urls).await?;
        let mut cycles: Vec<Box<dyn Cycle>> = Vec::with_capacity(tasks);
        for _ in 0..tasks {
            cycles.push(Box::new(super::redlock::Ours(super::redlock::red_lock(
                &clients, name, mutexes,
            )?)));
        }
        return Ok(cycles);
    }
    let client = Client::connect(url).await.map_err(|e| e.to_string())?;
    let mut cycles: Vec<Box<dyn Cycle>> = Vec::with_capacity(tasks);
    for _ in 0..tasks {
        let e = |e: ferrisson::Error| e.to_string();
        cycles.push(match kind {
            "reentrant-lock" => Box::new(HoldCycle(ReentrantLock::new(&client, name).map_err(e)?)),
            "spin-lock" => Box::new(HoldCycle(SpinLock::new(&client, name).map_err(e)?)),
            "write-lock" => Box::new(HoldCycle(
                ReadWriteLock::new(&client, name).map_err(e)?.write_lock(),
            )),
            "mutex" => Box::new(HoldCycle(LeanMutex::new(&client, name).map_err(e)?)),
            "fair-lock" => Box::new(HoldCycle(FairLock::new(&client, name).map_err(e)?)),
            other => return Err(format!("unknown kind `{other}`")),
        });
    }
    Ok(cycles)
}

/// A server the RedLocks run without: stopped once the clients have connected, started again
/// after the phase.
type Outage = Option<std::sync::Arc<std::sync::Mutex<ferrisson_testkit::RedisServer>>>;

fn set_down(outage: &Outage, down: bool) {
    if let Some(server) = outage {
        let mut server = server.lock().unwrap_or_else(|e| e.into_inner());
        tokio::task::block_in_place(|| if down { server.stop() } else { server.start() });
    }
}

/// Wall-clock milliseconds (the coordinator and its workers share the machine's clock).
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// How long workers get to start and connect before their phase begins.
const WORKER_START: Duration = Duration::from_millis(1500);

/// The worker process: `--worker KIND URL NAME HOLD_US PHASE_MS START_UNIX_MS TASKS`.
/// Connects, waits for the start, runs one client's `TASKS` tasks until the phase ends and
/// prints `acquisitions <n>`, `max_wait_us <µs>` and `p50_wait_us <µs>`.
pub async fn worker(args: &[String]) -> Result<(), String> {
    let [kind, url, name, hold_us, phase_ms, start_ms, tasks] = args else {
        return Err("--worker KIND URL NAME HOLD_US PHASE_MS START_UNIX_MS TASKS".into());
    };
    let parse = |s: &str| s.parse::<u64>().map_err(|e| format!("{s}: {e}"));
    let hold = Duration::from_micros(parse(hold_us)?);
    let phase = Duration::from_millis(parse(phase_ms)?);
    let start = parse(start_ms)?;
    let tasks = usize::try_from(parse(tasks)?).map_err(|e| e.to_string())?;
    let cycles = client_cycles(url, kind, name, tasks).await?;
    tokio::time::sleep(Duration::from_millis(start.saturating_sub(now_ms()))).await;
    let mut result = workload::run(cycles, phase, hold).await?;
    println!("acquisitions {}", result.total());
    println!("max_wait_us {:.0}", result.waits.percentile(100.0));
    println!("p50_wait_us {:.0}", result.waits.percentile(50.0));
    Ok(())
}

/// What one worker process reported.
struct Worker {
    acquisitions: u64,
    /// Its longest acquire, µs.
    max_wait_us: f64,
    /// Its median acquire, µs.
    p50_wait_us: f64,
}

/// One round across processes: what each client reported (each worker runs for the phase,
/// once its client has connected).
async fn across_processes(
    ctx: &Ctx,
    (url, kind, tasks): (&str, &str, usize),
    name: &str,
    hold: Duration,
    outage: &Outage,
) -> Result<Vec<Worker>, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let phase = ctx.phase();
    let start_in = ctx.pick(WORKER_START, WORKER_START, WORKER_START / 3);
    let start = now_ms() + u64::try_from(start_in.as_millis()).unwrap_or(0);
    let mut children = Vec::new();
    for _ in 0..CONTENDED_CLIENTS {
        let child = tokio::process::Command::new(&exe)
            .arg("--worker")
            .arg(kind)
            .arg(url)
            .arg(name)
            .arg(hold.as_micros().to_string())
            .arg(phase.as_millis().to_string())
            .arg(start.to_string())
            .arg(tasks.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("starting a worker: {e}"))?;
        children.push(child);
    }
    // Every worker has connected well before its phase starts.
    tokio::time::sleep(start_in / 2).await;
    set_down(outage, true);
    let counts = collect(children, kind).await;
    set_down(outage, false);
    counts
}

/// What each worker reported, once it has ended.
async fn collect(children: Vec<tokio::process::Child>, kind: &str) -> Result<Vec<Worker>, String> {
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
        let wait = |field: &str| {
            out.lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|n| n.trim().parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        counts.push(Worker {
            acquisitions: count,
            max_wait_us: wait("max_wait_us "),
            p50_wait_us: wait("p50_wait_us "),
        });
    }
    Ok(counts)
}

/// The same workload in this process: acquisitions per second.
async fn in_process(
    ctx: &Ctx,
    (url, kind, tasks): (&str, &str, usize),
    name: &str,
    hold: Duration,
    outage: &Outage,
) -> Result<f64, String> {
    let mut cycles = Vec::new();
    for _ in 0..CONTENDED_CLIENTS {
        cycles.extend(client_cycles(url, kind, name, tasks).await?);
    }
    set_down(outage, true);
    let rate = workload::run(cycles, ctx.phase(), hold).await;
    set_down(outage, false);
    Ok(rate?.per_sec())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// The variant of the RedLocks' records with one of their three servers down.
pub fn outage_variant() -> String {
    format!(
        "{},processes={CONTENDED_CLIENTS},one server down",
        hold_variant(OUTAGE_HOLD)
    )
}

/// The variant of `hold`'s records with every server up.
pub fn variant(hold: Duration) -> String {
    format!("{},processes={CONTENDED_CLIENTS}", hold_variant(hold))
}

/// The variant of the two-task runs (0 ms holds).
pub fn two_task_variant() -> String {
    format!(
        "{},processes={CONTENDED_CLIENTS},tasks={FEW_TASKS}",
        hold_variant(Duration::ZERO)
    )
}

pub async fn run(ctx: &Ctx, records: &mut Records) -> Result<(), String> {
    // The RedLocks' three servers; the last is the one taken down.
    let mut servers = tokio::task::spawn_blocking(|| {
        (0..3)
            .map(|_| ferrisson_testkit::RedisServer::try_spawn())
            .collect::<Result<Vec<_>, _>>()
    })
    .await
    .map_err(|e| e.to_string())??;
    let red_urls = servers
        .iter()
        .map(ferrisson_testkit::RedisServer::url)
        .collect::<Vec<_>>()
        .join(",");
    let down: Outage = servers
        .pop()
        .map(|s| std::sync::Arc::new(std::sync::Mutex::new(s)));
    for kind in KINDS {
        let red = kind.starts_with("redlock");
        let url = if red {
            red_urls.as_str()
        } else {
            ctx.url.as_str()
        };
        for hold in HOLDS {
            let variant = variant(hold);
            measure(
                ctx,
                records,
                (url, kind, CONTENDED_TASKS),
                hold,
                &variant,
                &None,
            )
            .await?;
        }
        // Not in quick mode: with one server down a RedLock acquire can take minutes (see
        // docs/benchmarks.md), far past the smoke test's budget.
        if red && !ctx.quick {
            // One of the three down: every round needs both others.
            let variant = outage_variant();
            measure(
                ctx,
                records,
                (url, kind, CONTENDED_TASKS),
                OUTAGE_HOLD,
                &variant,
                &down,
            )
            .await?;
        }
    }
    for kind in TWO_TASK_KINDS {
        measure(
            ctx,
            records,
            (ctx.url.as_str(), kind, FEW_TASKS),
            Duration::ZERO,
            &two_task_variant(),
            &None,
        )
        .await?;
    }
    Ok(())
}

/// Rounds of `kind` with `hold`, across processes and in this one, recorded under `variant`.
async fn measure(
    ctx: &Ctx,
    records: &mut Records,
    (url, kind, tasks): (&str, &str, usize),
    hold: Duration,
    variant: &str,
    outage: &Outage,
) -> Result<(), String> {
    // One round in quick mode: the smoke test runs every scenario once, inside CI's budget.
    let rounds = if ctx.quick { 1 } else { 3 };
    let name = format!("bench:processes:{kind}:{variant}");
    let (mut ratios, mut rates, mut share_min, mut share_max, mut max_wait) =
        (Vec::new(), Vec::new(), f64::MAX, 0.0_f64, 0.0_f64);
    let mut p50_waits = Vec::new();
    for round in 0..rounds {
        let (counts, here) = workload::in_turn(
            round % 2 == 0,
            across_processes(ctx, (url, kind, tasks), &name, hold, outage),
            in_process(ctx, (url, kind, tasks), &name, hold, outage),
        )
        .await?;
        let total: u64 = counts.iter().map(|w| w.acquisitions).sum();
        let fair = total as f64 / counts.len().max(1) as f64;
        for w in &counts {
            share_min = share_min.min(w.acquisitions as f64 / fair.max(1e-9));
            share_max = share_max.max(w.acquisitions as f64 / fair.max(1e-9));
            max_wait = max_wait.max(w.max_wait_us / 1000.0);
            p50_waits.push(w.p50_wait_us / 1000.0);
        }
        let rate = total as f64 / ctx.phase().as_secs_f64().max(1e-9);
        rates.push(rate);
        ratios.push(rate / here.max(1e-9));
        if !kind.starts_with("redlock") {
            ctx.probe.flushall().await?;
        }
    }
    let lib = library(kind);
    let s = "contended";
    records.push(
        s,
        variant,
        lib,
        "acquisitions_per_sec",
        median(rates),
        "acq/s",
    );
    records.push(s, variant, lib, "process_share_min", share_min, "x");
    records.push(s, variant, lib, "process_share_max", share_max, "x");
    records.push(s, variant, lib, "max_wait_ms", max_wait, "ms");
    // The typical acquire (the median of every worker's median, over the rounds), and the
    // longest against it: how far the unluckiest acquire strays from the rest.
    let p50_wait = median(p50_waits);
    records.push(s, variant, lib, "p50_wait_ms", p50_wait, "ms");
    records.push(
        s,
        variant,
        lib,
        "max_to_p50_wait",
        max_wait / p50_wait.max(1e-9),
        "x",
    );
    records.push(s, variant, lib, "ratio_to_in_process", median(ratios), "x");
    Ok(())
}
