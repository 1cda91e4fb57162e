//! `raw`: the ceiling. The script calls the library makes for a lock and an unlock, issued
//! directly with redis-rs; and the `PING` round trip.

use std::time::Duration;

use ferrisson_core::__engine::keys::RequestId;
use tokio::time::Instant;

use super::{Ctx, UNCONTENDED};
use crate::record::Records;
use crate::stats::Latencies;
use crate::workload::{self, BoxFuture, Cycle};

/// The library name of the bare script calls' records (redis-rs, no library around them).
pub const RAW_LIBRARY: &str = "redis-rs";

/// The variant and library of the server ceiling's records.
pub const CEILING: &str = "server-ceiling";
pub const CEILING_LIBRARY: &str = "redis-rs pipelined";

struct RawCycle {
    con: redis::aio::MultiplexedConnection,
    key: String,
    owner: String,
    acquire: String,
    release: String,
    /// The client's record on the key, as the library's (one release at a time: slot 0).
    record: String,
    /// The client's undone marks on the key, which the library's acquire reads.
    undone: String,
    /// Call sequence numbers, as the library numbers its acquires and releases.
    seq: std::sync::atomic::AtomicU64,
}

impl RawCycle {
    /// The library's uncontended acquire call: the lock's key and the client's undone marks,
    /// the lease, the owner and a fresh sequence number (the fencing counter and the believed
    /// hold count go only to fenced locks and retries).
    fn acquire_cmd(&self) -> redis::Cmd {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(&self.acquire)
            .arg(2)
            .arg(&self.key)
            .arg(&self.undone)
            .arg(30_000)
            .arg(&self.owner)
            .arg(self.seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        cmd
    }

    /// The library's release call, as the library makes it: the key, the client's record,
    /// then owner, publish command, the lease set while holds remain, the record's slot and a
    /// fresh sequence number; no flags (the library's set the record's TTL once per half
    /// retry window), no successor.
    fn release_cmd(&self) -> redis::Cmd {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(&self.release)
            .arg(2)
            .arg(&self.key)
            .arg(&self.record)
            .arg(&self.owner)
            .arg("publish")
            .arg(30_000)
            .arg(0)
            .arg(self.seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        cmd
    }
}

/// A script reply as integers: a table's, or an integer alone (the lock scripts answer their
/// hot path with an integer).
fn ints(reply: &redis::Value) -> Vec<i64> {
    match reply {
        redis::Value::Int(n) => vec![*n],
        redis::Value::Array(items) => items
            .iter()
            .map(|v| match v {
                redis::Value::Int(n) => *n,
                _ => i64::MIN,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// An uncontended acquire's reply, checked: a hold count of 1 (alone, or in `{1, held, token}`).
fn check_acquired(reply: &redis::Value) -> Result<(), String> {
    let reply = ints(reply);
    if reply.first() != Some(&1) {
        return Err(format!(
            "raw acquire of an uncontended key failed: {reply:?}"
        ));
    }
    Ok(())
}

/// An uncontended release's reply, checked: freed, as an uncontended release must (a raw
/// cycle doing less than the library's would make a false ceiling).
fn check_released(reply: &redis::Value) -> Result<(), String> {
    let reply = ints(reply);
    if reply.first() != Some(&1) {
        return Err(format!(
            "raw release of an uncontended key did not free it: {reply:?}"
        ));
    }
    Ok(())
}

impl RawCycle {
    /// Sends `cmd` and checks its reply with `check`.
    async fn send(
        &self,
        cmd: redis::Cmd,
        check: fn(&redis::Value) -> Result<(), String>,
    ) -> Result<(), String> {
        let reply: redis::Value = cmd
            .query_async(&mut self.con.clone())
            .await
            .map_err(|e| e.to_string())?;
        check(&reply)
    }

    /// The library's uncontended acquire, sent and checked.
    async fn acquire(&self) -> Result<(), String> {
        self.send(self.acquire_cmd(), check_acquired).await
    }

    /// The library's release that frees the key, sent and checked.
    async fn release(&self) -> Result<(), String> {
        self.send(self.release_cmd(), check_released).await
    }
}

impl Cycle for RawCycle {
    fn cycle(&self, _hold: Duration) -> BoxFuture<'_, Result<Duration, String>> {
        Box::pin(async move {
            let t0 = Instant::now();
            self.acquire().await?;
            let waited = t0.elapsed();
            self.release().await?;
            Ok(waited)
        })
    }
}

/// The library name of the lean mutex's bare calls.
pub const RAW_MUTEX_LIBRARY: &str = "redis-rs mutex layout";

/// The lean mutex's bare calls on one key: `SET key token NX PX lease GET`, then its release
/// script, with nothing around them: what the standard Redlock layout, with ferrisson's release
/// (the waiter mark checked), lets any client reach.
struct RawMutexCycle {
    con: redis::aio::MultiplexedConnection,
    key: String,
    marker: String,
    token: String,
    release: redis::Script,
}

impl Cycle for RawMutexCycle {
    fn cycle(&self, _hold: Duration) -> BoxFuture<'_, Result<Duration, String>> {
        Box::pin(async move {
            let t0 = Instant::now();
            let mut con = self.con.clone();
            let held: Option<String> = redis::cmd("SET")
                .arg(&self.key)
                .arg(&self.token)
                .arg("NX")
                .arg("PX")
                .arg(30_000)
                .arg("GET")
                .query_async(&mut con)
                .await
                .map_err(|e| e.to_string())?;
            if held.is_some() {
                return Err(format!("`{}` was held", self.key));
            }
            let waited = t0.elapsed();
            let _: i64 = self
                .release
                .key(&self.key)
                .key(&self.marker)
                .arg(&self.token)
                .invoke_async(&mut con)
                .await
                .map_err(|e| e.to_string())?;
            Ok(waited)
        })
    }
}

/// `tasks` bare lean-mutex cycles on distinct keys over one multiplexed connection.
pub async fn raw_mutex_cycles(
    url: &str,
    variant: &str,
    tasks: usize,
) -> Result<Vec<Box<dyn Cycle>>, String> {
    let client = redis::Client::open(url).map_err(|e| e.to_string())?;
    let con = client
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| e.to_string())?;
    let release = redis::Script::new(
        ferrisson_lock::scripts()
            .into_iter()
            .find(|s| s.name() == "lock/mutex_release")
            .ok_or("no lock/mutex_release script")?
            .source(),
    );
    Ok((0..tasks)
        .map(|i| {
            let key = format!("bench:raw-mutex:{variant}:{i}");
            Box::new(RawMutexCycle {
                con: con.clone(),
                marker: format!("ferrisson_mutex__channel:{{{key}}}"),
                key,
                token: format!("00000000-0000-4000-8000-000000000000:{i}"),
                release: release.clone(),
            }) as Box<dyn Cycle>
        })
        .collect())
}

/// The bare calls of a RedLock over independent servers: the library's acquire sent to every
/// instance at once, then its release to every instance at once, with nothing around them (no
/// validity, quorum or watchdog bookkeeping): what the Redisson layout lets any client reach
/// on a RedLock, the `redlock` scenario's bound.
pub struct RawRedCycle(Vec<RawCycle>);

impl Cycle for RawRedCycle {
    fn cycle(&self, _hold: Duration) -> BoxFuture<'_, Result<Duration, String>> {
        Box::pin(async move {
            let t0 = Instant::now();
            futures::future::try_join_all(self.0.iter().map(RawCycle::acquire)).await?;
            let waited = t0.elapsed();
            futures::future::try_join_all(self.0.iter().map(RawCycle::release)).await?;
            Ok(waited)
        })
    }
}

/// `tasks` bare RedLock cycles over the servers at `urls` (one multiplexed connection to each),
/// each on a name of its own, the same name on every server.
pub async fn raw_red_cycles(
    urls: &[String],
    variant: &str,
    tasks: usize,
) -> Result<Vec<Box<dyn Cycle>>, String> {
    let mut per_server = Vec::new();
    for url in urls {
        per_server.push(raw_cycles_of(url, variant, tasks).await?.into_iter());
    }
    Ok((0..tasks)
        .map(|_| {
            let parts = per_server.iter_mut().filter_map(Iterator::next).collect();
            Box::new(RawRedCycle(parts)) as Box<dyn Cycle>
        })
        .collect())
}

/// Connections and pipeline depth of the server ceiling.
const CEILING_CONNECTIONS: usize = 4;
const CEILING_DEPTH: usize = 64;

/// How the server ceiling sends its lock + unlock pairs: what Redis runs per pair, with the
/// client doing as little as a client can.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairShape {
    /// ferrisson's two script calls per pair, each an `EVALSHA` of its own.
    Calls,
    /// The same calls in the scripts' batch form (what coalescing sends): one `EVALSHA` for
    /// the 64 acquires of a pipeline, one for the 64 releases.
    Batched,
    /// rslock's pair: `SET key value NX PX`, then an `EVALSHA` of a compare-and-delete script.
    Rslock,
}

impl PairShape {
    /// The variant and library of the shape's records in the `raw` scenario.
    pub fn names(self) -> (&'static str, &'static str) {
        match self {
            Self::Calls => (CEILING, CEILING_LIBRARY),
            Self::Batched => ("server-ceiling batched", CEILING_LIBRARY),
            Self::Rslock => (CEILING, "rslock commands pipelined"),
        }
    }
}

/// rslock's release: delete the key if it still holds the caller's value (the compare-and-delete
/// of Redis's `SET` documentation).
const RSLOCK_RELEASE: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0";

/// The batch form of a call list: one `EVALSHA` of `sha` with the calls' keys and arguments
/// (the layout of `ferrisson_core::__engine::Script::batch_source`).
fn batch_cmd(sha: &str, calls: &[redis::Cmd]) -> Result<redis::Cmd, String> {
    let mut keys: Vec<Vec<u8>> = Vec::new();
    let mut args: Vec<Vec<u8>> = Vec::new();
    let (mut nk, mut na) = (0, 0);
    for call in calls {
        // EVALSHA, sha, key count, keys..., args...
        let parts: Vec<Vec<u8>> = call
            .args_iter()
            .map(|a| match a {
                redis::Arg::Simple(b) => Ok(b.to_vec()),
                _ => Err("a script call argument that is not bytes".to_string()),
            })
            .collect::<Result<_, _>>()?;
        let count: usize = std::str::from_utf8(parts.get(2).ok_or("a call without keys")?)
            .map_err(|e| e.to_string())?
            .parse()
            .map_err(|e: std::num::ParseIntError| e.to_string())?;
        let (k, a) = parts[3..].split_at(count);
        (nk, na) = (k.len(), a.len());
        keys.extend_from_slice(k);
        args.extend_from_slice(a);
    }
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(sha)
        .arg(keys.len())
        .arg(keys)
        .arg(calls.len())
        .arg(nk)
        .arg(na)
        .arg(args);
    Ok(cmd)
}

/// One pipeline of `cycles` pairs in `shape`, checked: every acquire took its key and every
/// release freed it.
async fn ceiling_round(
    con: &mut redis::aio::MultiplexedConnection,
    cycles: &[RawCycle],
    shape: PairShape,
    shas: &CeilingShas,
) -> Result<(), String> {
    let q = |e: redis::RedisError| e.to_string();
    match shape {
        PairShape::Calls => {
            let mut acquires = redis::pipe();
            let mut releases = redis::pipe();
            for cycle in cycles {
                acquires.add_command(cycle.acquire_cmd());
                releases.add_command(cycle.release_cmd());
            }
            let replies: Vec<redis::Value> = acquires.query_async(con).await.map_err(q)?;
            replies.iter().try_for_each(check_acquired)?;
            let replies: Vec<redis::Value> = releases.query_async(con).await.map_err(q)?;
            replies.iter().try_for_each(check_released)
        }
        PairShape::Batched => {
            let acquires: Vec<redis::Cmd> = cycles.iter().map(RawCycle::acquire_cmd).collect();
            let releases: Vec<redis::Cmd> = cycles.iter().map(RawCycle::release_cmd).collect();
            let replies: Vec<Vec<redis::Value>> = batch_cmd(&shas.batch_acquire, &acquires)?
                .query_async(con)
                .await
                .map_err(q)?;
            replies
                .iter()
                .try_for_each(|r| check_acquired(r.first().unwrap_or(&redis::Value::Nil)))?;
            let replies: Vec<Vec<redis::Value>> = batch_cmd(&shas.batch_release, &releases)?
                .query_async(con)
                .await
                .map_err(q)?;
            replies
                .iter()
                .try_for_each(|r| check_released(r.first().unwrap_or(&redis::Value::Nil)))
        }
        PairShape::Rslock => {
            let mut acquires = redis::pipe();
            let mut releases = redis::pipe();
            for cycle in cycles {
                let value = RequestId::random().latch_key("rslock");
                acquires
                    .cmd("SET")
                    .arg(&cycle.key)
                    .arg(&value)
                    .arg("NX")
                    .arg("PX")
                    .arg(30_000);
                releases
                    .cmd("EVALSHA")
                    .arg(&shas.rslock_release)
                    .arg(1)
                    .arg(&cycle.key)
                    .arg(value);
            }
            let replies: Vec<Option<String>> = acquires.query_async(con).await.map_err(q)?;
            if replies.iter().any(Option::is_none) {
                return Err("rslock's SET NX of an uncontended key failed".into());
            }
            let replies: Vec<i64> = releases.query_async(con).await.map_err(q)?;
            if replies.iter().any(|r| *r != 1) {
                return Err("rslock's release of an uncontended key did not free it".into());
            }
            Ok(())
        }
    }
}

/// The digests the ceiling's shapes run besides the library's scripts.
struct CeilingShas {
    batch_acquire: String,
    batch_release: String,
    rslock_release: String,
}

async fn load_ceiling_shas(
    con: &mut redis::aio::MultiplexedConnection,
) -> Result<CeilingShas, String> {
    let mut load = async |source: &str| -> Result<String, String> {
        redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(source)
            .query_async(&mut *con)
            .await
            .map_err(|e| e.to_string())
    };
    let script = |name: &str| {
        ferrisson_lock::scripts()
            .into_iter()
            .find(|s| s.name() == name)
            .ok_or_else(|| format!("no script {name}"))
    };
    Ok(CeilingShas {
        batch_acquire: load(script("core/hash_lock_acquire")?.batch_source()).await?,
        batch_release: load(script("core/hash_lock_release")?.batch_source()).await?,
        rslock_release: load(RSLOCK_RELEASE).await?,
    })
}

/// The server's ceiling for a lock + unlock in `shape` ([`PairShape::Calls`]: the library's
/// own two script calls): pairs on distinct keys sent in pipelines of 64 acquires, then 64
/// releases, over 4 connections, so that the client does as little as a client can and the
/// server as much as it takes. Returns (pairs per second, the server's CPU per pair in
/// microseconds).
pub async fn server_ceiling(ctx: &Ctx, shape: PairShape) -> Result<(f64, f64), String> {
    let mut tasks = Vec::new();
    let deadline = Instant::now()
        .checked_add(ctx.phase())
        .ok_or("the ceiling's phase is too long for the clock")?;
    let mut connections = Vec::new();
    for c in 0..CEILING_CONNECTIONS {
        let cycles = raw_cycles_of(&ctx.url, &format!("ceiling:{c}"), CEILING_DEPTH).await?;
        let Some(mut con) = cycles.first().map(|c| c.con.clone()) else {
            continue;
        };
        let shas = load_ceiling_shas(&mut con).await?;
        connections.push((con, cycles, shas));
    }
    let before = ctx.probe.server_cpu().await?;
    let started = Instant::now();
    for (mut con, cycles, shas) in connections {
        tasks.push(tokio::spawn(async move {
            let mut pairs = 0u64;
            while Instant::now() < deadline {
                ceiling_round(&mut con, &cycles, shape, &shas).await?;
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
    Ok((0..tasks)
        .map(|i| {
            let key = format!("bench:raw:{variant}:{i}");
            RawCycle {
                con: con.clone(),
                record: RequestId::random().latch_key(&format!("{{{key}}}:record")),
                undone: RequestId::random().latch_key(&format!("{{{key}}}:undone")),
                seq: std::sync::atomic::AtomicU64::new(1),
                key,
                owner: format!("00000000-0000-4000-8000-000000000000:{i}"),
                acquire: acquire.clone(),
                release: release.clone(),
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
    let pings = ctx.pick(5_000, 500, 100);
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

    // What Redis spends on a pair in each shape: the library's calls (the ceiling the
    // uncontended ratios are against), their batch form, and rslock's commands.
    for shape in [PairShape::Calls, PairShape::Batched, PairShape::Rslock] {
        let (ceiling, ceiling_cpu) = server_ceiling(ctx, shape).await?;
        let (variant, library) = shape.names();
        records.push("raw", variant, library, "ops_per_sec", ceiling, "ops/s");
        records.push(
            "raw",
            variant,
            library,
            "server_cpu_us_per_op",
            ceiling_cpu,
            "us",
        );
        ctx.probe.flushall().await?;
    }
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
