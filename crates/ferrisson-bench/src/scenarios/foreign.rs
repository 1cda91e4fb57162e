//! `foreign`: hand-offs from another Redlock client to a ferrisson `Mutex` waiter.
//!
//! A peer holds the lock: rslock (in this process), redis-py's `Lock` and npm `redlock` (a
//! process each hold, the interop tests' drivers from `crates/ferrisson-interop/peers`,
//! installed by `.ci/redlock-peers.sh`; skipped, with the reason printed, when they cannot be
//! had). A ferrisson waiter waits, and the peer releases after a hold. Measured per hand-off:
//! the time from the peer's release (from when it is asked to: for a process peer this
//! includes the pipe to it) to the waiter's hold, and the tries the waiter sent while the peer
//! held (`SET`, `EVALSHA`, counted by `INFO commandstats`, after its first tries). With
//! tracked waits (`ClientConfig::with_tracked_waits`, on by default) Redis tells the waiter of
//! the release; off (`re-check`, rslock only), the waiter re-checks every 100 to 200 ms.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use ferrisson::{AcquireOptions, Client, ClientConfig, Lock, Mutex};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::time::Instant;

use super::Ctx;
use crate::record::Records;
use crate::stats::Latencies;

/// How long a peer holds before it releases: a few of the untracked waiter's re-checks.
const HOLD: Duration = Duration::from_millis(250);

/// Who holds the lock before the ferrisson waiter.
#[derive(Debug, Clone, Copy)]
enum Peer {
    Rslock,
    RedisPy,
    NodeRedlock,
}

impl Peer {
    fn name(self) -> &'static str {
        match self {
            Peer::Rslock => "rslock",
            Peer::RedisPy => "redis-py",
            Peer::NodeRedlock => "node-redlock",
        }
    }
}

/// A peer's hold.
enum Holding {
    Rslock(rslock::Lock),
    Process(Box<PeerProcess>),
}

/// A peer process holding the lock until told to release it.
struct PeerProcess {
    _child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
}

/// Where the interop tests' Redlock peers are installed (installed here when missing).
async fn peers_dir() -> Result<PathBuf, String> {
    let dir = match std::env::var_os("FERRISSON_REDLOCK_PEERS") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/tmp/redlock-peers"),
    };
    let ready = dir.join("python/venv/bin/python").exists()
        && dir.join("node/node_modules/redlock").is_dir();
    if !ready {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.ci/redlock-peers.sh");
        let out = Command::new("bash")
            .arg(&script)
            .arg(&dir)
            .output()
            .await
            .map_err(|e| format!("running {}: {e}", script.display()))?;
        if !out.status.success() {
            return Err(format!(
                "installing the Redlock peers failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    Ok(dir)
}

async fn line(stdout: &mut Lines<BufReader<ChildStdout>>) -> Result<String, String> {
    match tokio::time::timeout(Duration::from_secs(60), stdout.next_line()).await {
        Ok(Ok(Some(line))) => Ok(line),
        other => Err(format!("the peer printed nothing more: {other:?}")),
    }
}

impl Peer {
    async fn take(
        self,
        url: &str,
        name: &str,
        rslock: &rslock::LockManager,
        dir: Option<&PathBuf>,
    ) -> Result<Holding, String> {
        let (program, script) = match (self, dir) {
            (Peer::Rslock, _) => {
                let lock = rslock
                    .lock(name.as_bytes(), Duration::from_secs(30))
                    .await
                    .map_err(|e| format!("rslock: {e:?}"))?;
                return Ok(Holding::Rslock(lock));
            }
            (Peer::RedisPy, Some(dir)) => (
                dir.join("python/venv/bin/python"),
                dir.join("python/redlock_peer.py"),
            ),
            (Peer::NodeRedlock, Some(dir)) => {
                (PathBuf::from("node"), dir.join("node/redlock_peer.mjs"))
            }
            (_, None) => return Err("no peers".into()),
        };
        let mut child = Command::new(program)
            .arg(script)
            .args(["take", url, name, "10", "30000"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("{}: {e}", self.name()))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(format!("{}: no pipes", self.name()));
        };
        let mut stdout = BufReader::new(stdout).lines();
        match line(&mut stdout).await?.as_str() {
            "held" => Ok(Holding::Process(Box::new(PeerProcess {
                _child: child,
                stdin,
                stdout,
            }))),
            other => Err(format!("{} said {other}", self.name())),
        }
    }
}

impl Holding {
    async fn release(self, rslock: &rslock::LockManager) -> Result<(), String> {
        match self {
            Holding::Rslock(lock) => {
                rslock.unlock(&lock).await;
                Ok(())
            }
            Holding::Process(mut p) => {
                let PeerProcess { stdin, stdout, .. } = &mut *p;
                stdin.write_all(b"go\n").await.map_err(|e| e.to_string())?;
                stdin.flush().await.map_err(|e| e.to_string())?;
                match line(stdout).await?.as_str() {
                    "released" => Ok(()),
                    other => Err(format!("the peer said {other}")),
                }
            }
        }
    }
}

pub async fn run(ctx: &Ctx, records: &mut Records) -> Result<(), String> {
    let handoffs = ctx.pick(200, 40, 3);
    let dir = if !ctx.external_peers {
        println!("foreign: redis-py and node-redlock skipped (--no-external-peers)");
        None
    } else {
        match peers_dir().await {
            Ok(dir) => Some(dir),
            Err(reason) => {
                println!("foreign: redis-py and node-redlock skipped: {reason}");
                None
            }
        }
    };
    let mut runs = vec![(Peer::Rslock, true), (Peer::Rslock, false)];
    if dir.is_some() {
        runs.extend([(Peer::RedisPy, true), (Peer::NodeRedlock, true)]);
    }
    for (peer, tracked) in runs {
        let variant = if tracked {
            peer.name().to_owned()
        } else {
            format!("{},re-check", peer.name())
        };
        let figures = handoffs_from(ctx, peer, tracked, dir.as_ref(), handoffs, &variant).await?;
        let [p50, p99, tries, missed] = figures;
        let v = variant.as_str();
        records.push("foreign", v, "ferrisson", "handoff_us", p50, "us");
        records.push("foreign", v, "ferrisson", "handoff_p99_us", p99, "us");
        records.push("foreign", v, "ferrisson", "tries_while_held", tries, "cmd");
        records.push("foreign", v, "ferrisson", "missed_wakeups", missed, "n");
    }
    ctx.probe.flushall().await
}

/// `handoffs` hand-offs from `peer` to a ferrisson waiter: the median and 99th percentile
/// hand-off (µs), the tries per hand-off while the peer held, the missed wake-ups.
async fn handoffs_from(
    ctx: &Ctx,
    peer: Peer,
    tracked: bool,
    dir: Option<&PathBuf>,
    handoffs: usize,
    variant: &str,
) -> Result<[f64; 4], String> {
    let config = ClientConfig::new(ctx.url.clone())
        .with_tracked_waits(tracked)
        .with_client_record(false);
    let client = Client::with_config(config)
        .await
        .map_err(|e| e.to_string())?;
    let name = format!("bench:foreign:{variant}");
    let mutex = Mutex::new(&client, &name).map_err(|e| e.to_string())?;
    // Loads the scripts: the counted hand-offs need no EVAL.
    mutex
        .lock()
        .await
        .map_err(|e| e.to_string())?
        .unlock()
        .await
        .map_err(|e| e.to_string())?;
    let rslock = rslock::LockManager::new(vec![ctx.url.clone()]);
    let mut latencies = Latencies::default();
    let mut tries = 0u64;
    let missed_before = client.tracking_stats().missed;
    for _ in 0..handoffs {
        let holding = peer.take(&ctx.url, &name, &rslock, dir).await?;
        let waiter = {
            let mutex = mutex.clone();
            tokio::spawn(async move {
                let guard = mutex
                    .try_lock_with(AcquireOptions::new().with_wait(Duration::from_secs(30)))
                    .await;
                (Instant::now(), guard)
            })
        };
        // The waiter's first tries (the plain `SET`, then the one that arms tracking or
        // marks) are made by then; what it sends afterwards is polling.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let before = ctx.probe.command_calls().await?;
        tokio::time::sleep(HOLD).await;
        let during = ctx.probe.command_calls().await?;
        tries += ["evalsha", "set"]
            .iter()
            .map(|c| {
                let get =
                    |m: &std::collections::HashMap<String, u64>| m.get(*c).copied().unwrap_or(0);
                get(&during).saturating_sub(get(&before))
            })
            .sum::<u64>();
        let released = Instant::now();
        holding.release(&rslock).await?;
        let (taken_at, guard) = waiter.await.map_err(|e| e.to_string())?;
        let guard = guard
            .map_err(|e| e.to_string())?
            .ok_or("the waiter timed out")?;
        latencies.record(taken_at.saturating_duration_since(released));
        guard.unlock().await.map_err(|e| e.to_string())?;
    }
    let missed = client.tracking_stats().missed - missed_before;
    client.shutdown().await.map_err(|e| e.to_string())?;
    Ok([
        latencies.percentile(50.0),
        latencies.percentile(99.0),
        tries as f64 / handoffs as f64,
        missed as f64,
    ])
}
