//! `raw`: the ceiling. The script calls the library makes for a lock and an unlock, issued
//! directly with redis-rs; and the `PING` round trip.

use std::time::Duration;

use ferrisson::core::engine::keys::RequestId;
use tokio::time::Instant;

use super::{Ctx, UNCONTENDED};
use crate::record::Records;
use crate::stats::Latencies;
use crate::workload::{self, BoxFuture, Cycle};

/// The variant and library of the server ceiling's records.
pub const CEILING: &str = "server-ceiling";
pub const CEILING_LIBRARY: &str = "redis-rs pipelined";

struct RawCycle {
    con: redis::aio::MultiplexedConnection,
    key: String,
    token_key: String,
    channel: String,
    latch_prefix: String,
    owner: String,
    acquire: String,
    release: String,
    /// How long a release latch is kept: the library's retry window with default settings.
    latch_ms: u64,
}

impl RawCycle {
    /// The library's uncontended acquire call.
    fn acquire_cmd(&self) -> redis::Cmd {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(&self.acquire)
            .arg(2)
            .arg(&self.key)
            .arg(&self.token_key)
            .arg(30_000)
            .arg(&self.owner)
            .arg(0)
            .arg("0")
            .arg("0");
        cmd
    }

    /// The library's release call, with a fresh request id, as the library makes: an id
    /// reused from an earlier round would find that round's latch and skip the release.
    fn release_cmd(&self) -> redis::Cmd {
        let latch = RequestId::random().latch_key(&self.latch_prefix);
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(&self.release)
            .arg(4)
            .arg(&self.key)
            .arg(&self.channel)
            .arg(latch)
            .arg(&self.token_key)
            .arg(30_000)
            .arg(&self.owner)
            .arg(self.latch_ms)
            .arg("publish")
            .arg("")
            .arg(0)
            .arg("0");
        cmd
    }
}

/// An uncontended acquire's reply, checked.
fn check_acquired(reply: &[i64]) -> Result<(), String> {
    if reply.first() != Some(&1) {
        return Err(format!(
            "raw acquire of an uncontended key failed: {reply:?}"
        ));
    }
    Ok(())
}

/// An uncontended release's reply, checked: freed, as an uncontended release must (a raw
/// cycle doing less than the library's would make a false ceiling).
fn check_released(reply: &[i64]) -> Result<(), String> {
    if reply.first() != Some(&1) {
        return Err(format!(
            "raw release of an uncontended key did not free it: {reply:?}"
        ));
    }
    Ok(())
}

impl Cycle for RawCycle {
    fn cycle(&self, _hold: Duration) -> BoxFuture<'_, Result<Duration, String>> {
        Box::pin(async move {
            let mut con = self.con.clone();
            let t0 = Instant::now();
            let reply: Vec<i64> = self
                .acquire_cmd()
                .query_async(&mut con)
                .await
                .map_err(|e| e.to_string())?;
            check_acquired(&reply)?;
            let waited = t0.elapsed();
            let reply: Vec<i64> = self
                .release_cmd()
                .query_async(&mut con)
                .await
                .map_err(|e| e.to_string())?;
            check_released(&reply)?;
            Ok(waited)
        })
    }
}

/// Connections and pipeline depth of the server ceiling.
const CEILING_CONNECTIONS: usize = 4;
const CEILING_DEPTH: usize = 64;

/// The server's ceiling for the library's lock + unlock: the same two script calls on
/// distinct keys, sent in pipelines of 64 acquires, then 64 releases, over 4 connections, so
/// that the client does as little as a client can and the server as much as it takes.
/// Returns (pairs per second, the server's CPU per pair in microseconds).
pub async fn server_ceiling(ctx: &Ctx) -> Result<(f64, f64), String> {
    let mut tasks = Vec::new();
    let deadline = Instant::now()
        .checked_add(ctx.phase())
        .ok_or("the ceiling's phase is too long for the clock")?;
    let before = ctx.probe.server_cpu().await?;
    let started = Instant::now();
    for c in 0..CEILING_CONNECTIONS {
        let cycles = raw_cycles_of(&ctx.url, &format!("ceiling:{c}"), CEILING_DEPTH).await?;
        tasks.push(tokio::spawn(async move {
            let Some(first) = cycles.first() else {
                return Ok(0u64);
            };
            let mut con = first.con.clone();
            let mut pairs = 0u64;
            while Instant::now() < deadline {
                let mut acquires = redis::pipe();
                let mut releases = redis::pipe();
                for cycle in &cycles {
                    acquires.add_command(cycle.acquire_cmd());
                    releases.add_command(cycle.release_cmd());
                }
                let replies: Vec<Vec<i64>> = acquires
                    .query_async(&mut con)
                    .await
                    .map_err(|e| e.to_string())?;
                replies.iter().try_for_each(|r| check_acquired(r))?;
                let replies: Vec<Vec<i64>> = releases
                    .query_async(&mut con)
                    .await
                    .map_err(|e| e.to_string())?;
                replies.iter().try_for_each(|r| check_released(r))?;
                pairs += cycles.len() as u64;
            }
            Ok::<u64, String>(pairs)
        }));
    }
    let mut pairs = 0;
    for task in tasks {
        pairs += task.await.map_err(|e| e.to_string())??;
    }
    let elapsed = started.elapsed().as_secs_f64().max(1e-9);
    let cpu = ctx.probe.server_cpu().await? - before;
    Ok((pairs as f64 / elapsed, cpu * 1e6 / pairs.max(1) as f64))
}

/// Loads the lock scripts and returns (acquire sha, release sha).
pub async fn load_scripts(
    con: &mut redis::aio::MultiplexedConnection,
) -> Result<(String, String), String> {
    let mut shas = Vec::new();
    for name in ["core/hash_lock_acquire", "core/hash_lock_release"] {
        let script = ferrisson_lock::scripts()
            .into_iter()
            .find(|s| s.name() == name)
            .ok_or_else(|| format!("no script {name}"))?;
        let sha: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(script.source())
            .query_async(con)
            .await
            .map_err(|e| e.to_string())?;
        shas.push(sha);
    }
    Ok((shas[0].clone(), shas[1].clone()))
}

/// `tasks` raw lock + unlock cycles on distinct keys over one multiplexed connection: the
/// same two script calls the library makes, with nothing around them.
pub async fn raw_cycles(
    url: &str,
    variant: &str,
    tasks: usize,
) -> Result<Vec<Box<dyn Cycle>>, String> {
    Ok(raw_cycles_of(url, variant, tasks)
        .await?
        .into_iter()
        .map(|c| Box::new(c) as Box<dyn Cycle>)
        .collect())
}

/// `tasks` raw cycles sharing one new multiplexed connection.
async fn raw_cycles_of(url: &str, variant: &str, tasks: usize) -> Result<Vec<RawCycle>, String> {
    let client = redis::Client::open(url).map_err(|e| e.to_string())?;
    let mut con = client
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| e.to_string())?;
    let (acquire, release) = load_scripts(&mut con).await?;
    let defaults = ferrisson::ClientConfig::new(url);
    let latch_ms = defaults
        .get_retry()
        .window(defaults.get_response_timeout())
        .as_millis() as u64;
    Ok((0..tasks)
        .map(|i| {
            let key = format!("bench:raw:{variant}:{i}");
            RawCycle {
                con: con.clone(),
                token_key: format!("redisson_lock_token:{{{key}}}"),
                channel: format!("redisson_lock__channel:{{{key}}}"),
                latch_prefix: format!("redisson_unlock_latch:{{{key}}}"),
                key,
                owner: format!("00000000-0000-4000-8000-000000000000:{i}"),
                acquire: acquire.clone(),
                release: release.clone(),
                latch_ms,
            }
        })
        .collect())
}

pub async fn run(ctx: &Ctx, records: &mut Records) -> Result<(), String> {
    let client = redis::Client::open(ctx.url.as_str()).map_err(|e| e.to_string())?;
    let mut con = client
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| e.to_string())?;

    let mut rtt = Latencies::default();
    let pings = if ctx.quick { 500 } else { 5_000 };
    for _ in 0..pings {
        let t0 = Instant::now();
        redis::cmd("PING")
            .query_async::<String>(&mut con)
            .await
            .map_err(|e| e.to_string())?;
        rtt.record(t0.elapsed());
    }
    records.push(
        "raw",
        "ping",
        "redis-rs",
        "p50_us",
        rtt.percentile(50.0),
        "us",
    );
    records.push(
        "raw",
        "ping",
        "redis-rs",
        "p99_us",
        rtt.percentile(99.0),
        "us",
    );

    let (ceiling, ceiling_cpu) = server_ceiling(ctx).await?;
    records.push(
        "raw",
        CEILING,
        CEILING_LIBRARY,
        "ops_per_sec",
        ceiling,
        "ops/s",
    );
    records.push(
        "raw",
        CEILING,
        CEILING_LIBRARY,
        "server_cpu_us_per_op",
        ceiling_cpu,
        "us",
    );
    ctx.probe.flushall().await?;
    for (variant, tasks) in UNCONTENDED {
        let cycles = raw_cycles(&ctx.url, variant, tasks).await?;
        let mut result = workload::run(cycles, ctx.phase(), Duration::ZERO).await?;
        records.push(
            "raw",
            variant,
            "redis-rs",
            "ops_per_sec",
            result.per_sec(),
            "ops/s",
        );
        records.push(
            "raw",
            variant,
            "redis-rs",
            "p50_us",
            result.cycles.percentile(50.0),
            "us",
        );
        records.push(
            "raw",
            variant,
            "redis-rs",
            "p99_us",
            result.cycles.percentile(99.0),
            "us",
        );
    }
    ctx.probe.flushall().await
}
