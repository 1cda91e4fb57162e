//! `raw`: the ceiling. The script calls the library makes for a lock and an unlock, issued
//! directly with redis-rs; and the `PING` round trip.

use std::time::Duration;

use ferrisson::core::engine::keys::RequestId;
use tokio::time::Instant;

use super::{Ctx, UNCONTENDED};
use crate::record::Records;
use crate::stats::Latencies;
use crate::workload::{self, BoxFuture, Cycle};

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

impl Cycle for RawCycle {
    fn cycle(&self, _hold: Duration) -> BoxFuture<'_, Result<Duration, String>> {
        Box::pin(async move {
            let mut con = self.con.clone();
            let t0 = Instant::now();
            let reply: Vec<i64> = redis::cmd("EVALSHA")
                .arg(&self.acquire)
                .arg(2)
                .arg(&self.key)
                .arg(&self.token_key)
                .arg(30_000)
                .arg(&self.owner)
                .arg(0)
                .arg("0")
                .arg("0")
                .query_async(&mut con)
                .await
                .map_err(|e| e.to_string())?;
            if reply.first() != Some(&1) {
                return Err(format!(
                    "raw acquire of an uncontended key failed: {reply:?}"
                ));
            }
            let waited = t0.elapsed();
            // A fresh request id per release, as the library makes: an id reused from an
            // earlier round would find that round's latch and skip the release.
            let latch = RequestId::random().latch_key(&self.latch_prefix);
            let reply: Vec<i64> = redis::cmd("EVALSHA")
                .arg(&self.release)
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
                .arg("0")
                .query_async(&mut con)
                .await
                .map_err(|e| e.to_string())?;
            // Freed, as an uncontended release must: a raw cycle doing less than the
            // library's would make a false ceiling.
            if reply.first() != Some(&1) {
                return Err(format!(
                    "raw release of an uncontended key did not free it: {reply:?}"
                ));
            }
            Ok(waited)
        })
    }
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
            Box::new(RawCycle {
                con: con.clone(),
                token_key: format!("redisson_lock_token:{{{key}}}"),
                channel: format!("redisson_lock__channel:{{{key}}}"),
                latch_prefix: format!("redisson_unlock_latch:{{{key}}}"),
                key,
                owner: format!("00000000-0000-4000-8000-000000000000:{i}"),
                acquire: acquire.clone(),
                release: release.clone(),
                latch_ms,
            }) as Box<dyn Cycle>
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
