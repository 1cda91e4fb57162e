//! `ferrisson-bench`: ferrisson against the physical limit and against the libraries users
//! pick today. See `docs/benchmarks.md`.
//!
//! ```text
//! cargo run --release -p ferrisson-bench -- --quick
//! cargo run --release -p ferrisson-bench -- --json results.json --svg chart.svg
//! cargo run --release -p ferrisson-bench -- --scenario raw --scenario uncontended
//! ```
//!
//! It starts its own `redis-server` (or uses `REDIS_URL`), runs the named scenarios, prints a
//! table and writes flat JSON records. It exits non-zero when a scenario fails, never because a
//! number is slow.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod record;
mod replay;
mod report;
mod scenarios;
mod stats;
mod workload;

use std::path::PathBuf;
use std::process::ExitCode;

use record::Records;
use scenarios::Ctx;

/// Counts live heap bytes, so that the `waiters` scenario can tell what waiting costs.
#[global_allocator]
static GLOBAL: &stats_alloc::StatsAlloc<std::alloc::System> = &stats_alloc::INSTRUMENTED_SYSTEM;

/// Heap allocations made so far, program-wide (reallocations count as one each).
pub fn allocations() -> u64 {
    let stats = GLOBAL.stats();
    (stats.allocations + stats.reallocations) as u64
}

/// Heap bytes allocated and not yet freed, program-wide.
pub fn live_heap_bytes() -> i64 {
    let stats = GLOBAL.stats();
    stats.bytes_allocated as i64 - stats.bytes_deallocated as i64 + stats.bytes_reallocated as i64
}

const USAGE: &str = "usage: ferrisson-bench [--quick | --smoke] [--json FILE] [--svg FILE] \
[--scenario raw|server-cost|uncontended|contended|processes|waiters|foreign|semaphore|latch|peers|cluster|redlock|rate-limiter|faster-multilock]... [--no-external-peers] [--replay FILE]
       ferrisson-bench --from-json FILE [--svg FILE]   (print the table and draw the chart of an earlier run)";

struct Args {
    quick: bool,
    smoke: bool,
    json: Option<PathBuf>,
    svg: Option<PathBuf>,
    scenarios: Vec<String>,
    external_peers: bool,
    from_json: Option<PathBuf>,
    replay: Option<PathBuf>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        quick: false,
        smoke: false,
        json: None,
        svg: None,
        scenarios: Vec::new(),
        external_peers: true,
        from_json: None,
        replay: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--quick" => args.quick = true,
            // Every scenario in the shortest phases that still run it: for the smoke test.
            "--smoke" => {
                args.quick = true;
                args.smoke = true;
            }
            "--json" => args.json = Some(it.next().ok_or("--json needs a file")?.into()),
            "--svg" => args.svg = Some(it.next().ok_or("--svg needs a file")?.into()),
            "--scenario" => {
                let name = it.next().ok_or("--scenario needs a name")?;
                if !scenarios::ALL.contains(&name.as_str()) {
                    return Err(format!("unknown scenario `{name}`"));
                }
                args.scenarios.push(name);
            }
            "--no-external-peers" => args.external_peers = false,
            // server-cost: a peer's scripts replayed beside ours (src/replay.rs).
            "--replay" => args.replay = Some(it.next().ok_or("--replay needs a file")?.into()),
            "--from-json" => {
                args.from_json = Some(it.next().ok_or("--from-json needs a file")?.into())
            }
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    if args.scenarios.is_empty() {
        args.scenarios = scenarios::ALL.iter().map(|s| (*s).to_owned()).collect();
    }
    Ok(args)
}

fn main() -> ExitCode {
    // A worker of the `processes` scenario: one client of a contended workload.
    let raw: Vec<String> = std::env::args().skip(1).collect();
    if raw.first().map(String::as_str) == Some("--worker") {
        let runtime = match tokio::runtime::Runtime::new() {
            Ok(rt) => rt,
            Err(e) => {
                eprintln!("cannot start a runtime: {e}");
                return ExitCode::FAILURE;
            }
        };
        return match runtime.block_on(scenarios::processes::worker(&raw[1..])) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("worker: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("{e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    if let Some(path) = &args.from_json {
        return redraw(path, args.svg.as_deref());
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start a runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(run(args))
}

async fn run(args: Args) -> ExitCode {
    let replay = match args.replay.as_deref().map(replay::Replay::load).transpose() {
        Ok(replay) => replay,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    // A server of our own, unless REDIS_URL names one (its data is flushed between scenarios).
    let (_server, url) = match ferrisson_testkit::RedisServer::from_env_or_spawn() {
        Ok(found) => found,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let probe = match stats::Probe::new(&url) {
        Ok(probe) => probe,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "ferrisson-bench against {url} ({} mode, {} cores)",
        if args.smoke {
            "smoke"
        } else if args.quick {
            "quick"
        } else {
            "full"
        },
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    let ctx = Ctx {
        url,
        quick: args.quick,
        smoke: args.smoke,
        probe,
        external_peers: args.external_peers,
        replay,
    };
    let mut records = Records::default();
    let mut failed = Vec::new();
    for name in &args.scenarios {
        let started = std::time::Instant::now();
        match scenarios::run(name, &ctx, &mut records).await {
            Ok(()) => println!(
                "scenario {name}: done in {:.1}s",
                started.elapsed().as_secs_f64()
            ),
            Err(e) => {
                eprintln!("scenario {name} FAILED: {e}");
                failed.push(name.clone());
            }
        }
    }
    println!("\n{}", report::table(&records));
    if let Some(path) = &args.json {
        let json = match serde_json::to_string_pretty(&records.0) {
            Ok(json) => json,
            Err(e) => {
                eprintln!("cannot encode the results: {e}");
                return ExitCode::FAILURE;
            }
        };
        if let Err(e) = std::fs::write(path, json + "\n") {
            eprintln!("cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        println!("wrote {}", path.display());
    }
    if let Some(path) = &args.svg {
        if let Err(e) = std::fs::write(path, report::svg(&records)) {
            eprintln!("cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        println!("wrote {}", path.display());
    }
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!("failed scenarios: {}", failed.join(", "));
        ExitCode::FAILURE
    }
}

/// Prints the table of an earlier run's JSON, and draws its chart.
fn redraw(json: &std::path::Path, svg: Option<&std::path::Path>) -> ExitCode {
    let records = match std::fs::read_to_string(json)
        .map_err(|e| e.to_string())
        .and_then(|text| {
            serde_json::from_str::<Vec<record::Record>>(&text).map_err(|e| e.to_string())
        }) {
        Ok(records) => Records(records),
        Err(e) => {
            eprintln!("cannot read {}: {e}", json.display());
            return ExitCode::FAILURE;
        }
    };
    println!("{}", report::table(&records));
    if let Some(path) = svg {
        if let Err(e) = std::fs::write(path, report::svg(&records)) {
            eprintln!("cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        println!("wrote {}", path.display());
    }
    ExitCode::SUCCESS
}
