//! Peers in other languages, driven by the small scripts under `peers/`: npm
//! `redis-semaphore` (its `Mutex`) and PyPI `python-redis-lock`. Each is set up on first use
//! (`npm install`, a Python venv) and skipped, with the reason printed, when its runtime or
//! its packages cannot be had.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde::Deserialize;
use tokio::process::Command;

use super::contended::{self, Figures};
use super::{CONTENDED_CLIENTS, CONTENDED_TASKS, Ctx, HOLDS, UNCONTENDED, hold_variant};
use crate::record::Records;

const SETUP_TIMEOUT: Duration = Duration::from_secs(300);

fn peers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("peers")
}

/// A peer ready to run: the program and the arguments before the workload's.
pub struct Peer {
    pub library: &'static str,
    program: PathBuf,
    script: PathBuf,
}

#[derive(Debug, Deserialize)]
pub struct PeerReport {
    pub total: u64,
    pub elapsed_s: f64,
    pub per_task: Vec<u64>,
    pub wait_p50_us: f64,
    pub wait_p99_us: f64,
    pub cycle_p50_us: f64,
    pub cycle_p99_us: f64,
}

impl PeerReport {
    /// Cycles per second over the counted run.
    pub fn per_sec(&self) -> f64 {
        self.total as f64 / self.elapsed_s.max(1e-9)
    }
}

async fn run_command(cmd: &mut Command, timeout: Duration) -> Result<String, String> {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| e.to_string())?;
    let output = tokio::time::timeout(timeout, child.wait_with_output())
        .await
        .map_err(|_| format!("did not finish within {timeout:?}"))?
        .map_err(|e| e.to_string())?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: String = stderr.lines().rev().take(5).collect::<Vec<_>>().join(" | ");
        return Err(format!("exited with {}: {tail}", output.status));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

pub async fn node_peer() -> Result<Peer, String> {
    let dir = peers_dir().join("node");
    run_command(
        Command::new("node").arg("--version"),
        Duration::from_secs(20),
    )
    .await
    .map_err(|e| format!("node is not available ({e})"))?;
    if !dir.join("node_modules/redis-semaphore").is_dir() {
        run_command(
            Command::new("npm")
                .args(["install", "--no-audit", "--no-fund", "--loglevel=error"])
                .current_dir(&dir),
            SETUP_TIMEOUT,
        )
        .await
        .map_err(|e| format!("npm install failed ({e})"))?;
    }
    Ok(Peer {
        library: "redis-semaphore (npm)",
        program: PathBuf::from("node"),
        script: dir.join("bench.mjs"),
    })
}

async fn python_peer() -> Result<Peer, String> {
    let dir = peers_dir().join("python");
    let venv = dir.join(".venv");
    let python = venv.join("bin/python");
    let ready = run_command(
        Command::new(&python).args(["-c", "import redis, redis_lock"]),
        Duration::from_secs(20),
    )
    .await
    .is_ok();
    if !ready {
        run_command(
            Command::new("python3").args(["-m", "venv"]).arg(&venv),
            SETUP_TIMEOUT,
        )
        .await
        .map_err(|e| format!("python3 with venv is not available ({e})"))?;
        run_command(
            Command::new(&python)
                .args(["-m", "pip", "install", "-q", "-r"])
                .arg(dir.join("requirements.txt")),
            SETUP_TIMEOUT,
        )
        .await
        .map_err(|e| format!("pip install failed ({e})"))?;
    }
    Ok(Peer {
        library: "python-redis-lock (PyPI)",
        program: python,
        script: dir.join("bench.py"),
    })
}

/// One run of a peer script.
pub struct PeerWorkload<'a> {
    pub mode: &'a str,
    pub clients: usize,
    pub tasks: usize,
    pub duration: Duration,
    pub hold: Duration,
    pub prefix: &'a str,
    /// How long the peer runs the workload first, uncounted (a JIT's warm-up).
    pub warmup: Duration,
}

impl Peer {
    pub async fn run(&self, url: &str, workload: &PeerWorkload<'_>) -> Result<PeerReport, String> {
        let out = run_command(
            Command::new(&self.program)
                .arg(&self.script)
                .arg(url)
                .arg(workload.mode)
                .arg(workload.clients.to_string())
                .arg(workload.tasks.to_string())
                .arg(workload.duration.as_millis().to_string())
                .arg(workload.hold.as_millis().to_string())
                .arg(workload.prefix)
                .arg(workload.warmup.as_millis().to_string()),
            workload.duration + workload.warmup + Duration::from_secs(120),
        )
        .await
        .map_err(|e| format!("{}: {e}", self.library))?;
        let line = out.lines().last().unwrap_or_default();
        serde_json::from_str(line)
            .map_err(|e| format!("{}: unreadable report `{line}`: {e}", self.library))
    }
}

async fn run_peer(ctx: &Ctx, records: &mut Records, peer: &Peer) -> Result<(), String> {
    let slug = peer.library.split(' ').next().unwrap_or("peer");
    for (variant, tasks) in UNCONTENDED {
        let prefix = format!("bench:{slug}:{variant}");
        let report = peer
            .run(
                &ctx.url,
                &PeerWorkload {
                    mode: "uncontended",
                    clients: 1,
                    tasks,
                    duration: ctx.phase(),
                    hold: Duration::ZERO,
                    prefix: &prefix,
                    warmup: Duration::ZERO,
                },
            )
            .await?;
        let ops = report.per_sec();
        super::uncontended::record_uncontended(
            records,
            variant,
            peer.library,
            ops,
            report.cycle_p50_us,
            report.cycle_p99_us,
        );
    }
    for hold in HOLDS {
        let prefix = format!("bench:{slug}:contended:{}", hold_variant(hold));
        let phase = ctx.phase();
        let sample = async {
            // Half-way through the run, past the interpreter's start-up.
            tokio::time::sleep(phase / 2 + Duration::from_millis(300)).await;
            ctx.probe.subscriber_connections().await
        };
        let throughput = PeerWorkload {
            mode: "contended",
            clients: CONTENDED_CLIENTS,
            tasks: CONTENDED_TASKS,
            duration: phase,
            hold,
            prefix: &prefix,
            warmup: Duration::ZERO,
        };
        let (report, subscribers) = tokio::join!(peer.run(&ctx.url, &throughput), sample);
        let report = report?;
        let counter = ctx.probe.monitor().await?;
        let counted = peer
            .run(
                &ctx.url,
                &PeerWorkload {
                    mode: "contended",
                    clients: CONTENDED_CLIENTS,
                    tasks: CONTENDED_TASKS,
                    duration: ctx.count_phase(),
                    hold,
                    prefix: &prefix,
                    warmup: Duration::ZERO,
                },
            )
            .await?;
        let commands = counter.finish().await;
        let figures = Figures {
            acquisitions_per_sec: report.per_sec(),
            p50_wait_us: report.wait_p50_us,
            p99_wait_us: report.wait_p99_us,
            min_per_task: report.per_task.iter().copied().min().unwrap_or(0),
            max_per_task: report.per_task.iter().copied().max().unwrap_or(0),
            // Start-up and shutdown commands (connection set-up, PING, QUIT) are a few per
            // client, spread over the run's acquisitions.
            commands_per_acquisition: Some(commands as f64 / counted.total.max(1) as f64),
            subscriber_connections: Some(subscribers?),
            // The interpreter's own start-up runs in the same phases: not comparable.
            server_cpu_us: None,
            // The peers' processes report per task, not per client.
            ..Figures::default()
        };
        contended::record(records, hold, peer.library, &figures);
        ctx.probe.flushall().await?;
    }
    head_to_head(ctx, records, peer).await
}

/// The peer against ferrisson in alternating rounds (who goes first alternating), on the
/// `uncontended` and `contended` workloads: the median of the per-round ratios of ferrisson's
/// throughput to the peer's, recorded under the peer as `ferrisson_ratio_interleaved` (the
/// separate phases above run minutes apart, and this machine drifts by more than some of the
/// gaps). Each peer round first runs its workload 0.5 s uncounted: a JIT's warm-up (node) and
/// the threads' start-up (python) would otherwise count against a short round.
async fn head_to_head(ctx: &Ctx, records: &mut Records, peer: &Peer) -> Result<(), String> {
    let (rounds, round) = ctx.pick(
        (3, Duration::from_secs(2)),
        (2, Duration::from_secs(1)),
        (1, Duration::from_millis(500)),
    );
    let slug = peer.library.split(' ').next().unwrap_or("peer");
    let client = ferrisson::Client::connect(&ctx.url)
        .await
        .map_err(|e| e.to_string())?;
    let mut workloads: Vec<(&str, String, usize, usize, Duration)> = UNCONTENDED
        .iter()
        .map(|(variant, tasks)| {
            (
                "uncontended",
                (*variant).to_owned(),
                1,
                *tasks,
                Duration::ZERO,
            )
        })
        .collect();
    for hold in HOLDS {
        workloads.push((
            "contended",
            hold_variant(hold),
            CONTENDED_CLIENTS,
            CONTENDED_TASKS,
            hold,
        ));
    }
    for (scenario, variant, clients, tasks, hold) in workloads {
        let ours_name = format!("bench:h2h-{slug}:ferrisson:{variant}");
        let prefix = format!("bench:h2h-{slug}:peer:{variant}");
        let mut ratios = Vec::new();
        for r in 0..rounds {
            let ours = async {
                let cycles = if scenario == "uncontended" {
                    super::uncontended::lock_cycles(&client, &ours_name, tasks)?
                } else {
                    contended::ferrisson_cycles(&ctx.url, &ours_name).await?
                };
                Ok::<_, String>(crate::workload::run(cycles, round, hold).await?.per_sec())
            };
            let theirs = async {
                let report = peer
                    .run(
                        &ctx.url,
                        &PeerWorkload {
                            mode: scenario,
                            clients,
                            tasks,
                            duration: round,
                            hold,
                            prefix: &prefix,
                            warmup: Duration::from_millis(500),
                        },
                    )
                    .await?;
                Ok::<_, String>(report.per_sec())
            };
            let (ours, theirs) = crate::workload::in_turn(r % 2 == 0, ours, theirs).await?;
            ratios.push(ours / theirs.max(1e-9));
        }
        records.push(
            scenario,
            &variant,
            peer.library,
            "ferrisson_ratio_interleaved",
            super::uncontended::median(ratios),
            "x",
        );
        ctx.probe.flushall().await?;
    }
    Ok(())
}

pub async fn run(ctx: &Ctx, records: &mut Records) -> Result<(), String> {
    if !ctx.external_peers {
        println!("peers: node and python peers skipped (--no-external-peers)");
        return Ok(());
    }
    for setup in [node_peer().await, python_peer().await] {
        match setup {
            Ok(peer) => run_peer(ctx, records, &peer).await?,
            Err(reason) => println!("peers: skipped: {reason}"),
        }
    }
    Ok(())
}
