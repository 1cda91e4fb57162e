//! `server-cost`: what one uncontended acquire + release costs the Redis server, per kind of
//! the Redisson layout: commands per pair (`INFO commandstats`, a script's own commands
//! included) and server CPU per pair (`INFO cpu`), next to a pair of `PING`s measured in the
//! same run. 64 tasks of one client, each on a name of its own, with call coalescing off (each
//! call its own `EVALSHA`, as Redisson sends them); each kind runs in slices alternating with
//! the `PING` pairs, and its CPU per pair is also given as the median of its per-slice ratios
//! to them. After the slices, the keys alive beyond the objects themselves (retry latches)
//! are counted. docs/benchmarks.md carries each kind's budget: Redisson's own scripts on the
//! same layout.

use std::time::Duration;

use ferrisson::{Client, ClientConfig, ExpirableSemaphore, FairLock, ReentrantLock, Semaphore};

use super::Ctx;
use crate::record::Records;
use crate::stats::ServerSnapshot;
use crate::workload::{BoxFuture, Cycle, HoldCycle};

const SCENARIO: &str = "server-cost";
const TASKS: usize = 64;
const LIBRARY: &str = "ferrisson";
/// The reference pair's library name.
const PING: &str = "ping-pair";

/// The kinds measured, by variant name.
const KINDS: [&str; 5] = [
    "reentrant-lock",
    "fenced-lock",
    "fair-lock",
    "semaphore",
    "expirable-semaphore",
];

/// Two `PING`s over a plain multiplexed connection: the cheapest pair of requests.
struct PingCycle(redis::aio::MultiplexedConnection);

impl Cycle for PingCycle {
    fn cycle(&self, _hold: Duration) -> BoxFuture<'_, Result<Duration, String>> {
        Box::pin(async move {
            let mut con = self.0.clone();
            for _ in 0..2 {
                redis::cmd("PING")
                    .query_async::<()>(&mut con)
                    .await
                    .map_err(|e| e.to_string())?;
            }
            Ok(Duration::ZERO)
        })
    }
}

fn boxed<L: crate::workload::Acquire>(l: ferrisson::Result<L>) -> Result<Box<dyn Cycle>, String> {
    Ok(Box::new(HoldCycle(l.map_err(|e| e.to_string())?)))
}

/// The 64 cycles of `kind` (or of the `PING` pair), each on a name of its own, over one client
/// that sends every call alone.
async fn cycles(ctx: &Ctx, kind: &str, slice: usize) -> Result<Vec<Box<dyn Cycle>>, String> {
    if kind == PING {
        let con = redis::Client::open(ctx.url.as_str())
            .map_err(|e| e.to_string())?
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| e.to_string())?;
        return Ok((0..TASKS)
            .map(|_| Box::new(PingCycle(con.clone())) as Box<dyn Cycle>)
            .collect());
    }
    let config = ClientConfig::new(ctx.url.clone()).with_coalesce_calls(false);
    let client = Client::with_config(config)
        .await
        .map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(TASKS);
    for t in 0..TASKS {
        let name = format!("bench:cost:{kind}:{slice}:{t}");
        let c = &client;
        out.push(match kind {
            "reentrant-lock" => boxed(ReentrantLock::new(c, &name))?,
            "fenced-lock" => boxed(ReentrantLock::fenced(c, &name))?,
            "fair-lock" => boxed(FairLock::new(c, &name))?,
            "semaphore" => {
                let semaphore = Semaphore::new(c, &name).map_err(|e| e.to_string())?;
                semaphore
                    .try_set_permits(1)
                    .await
                    .map_err(|e| e.to_string())?;
                boxed(Ok(semaphore))?
            }
            "expirable-semaphore" => {
                let semaphore = ExpirableSemaphore::new(c, &name).map_err(|e| e.to_string())?;
                semaphore
                    .try_set_permits(1)
                    .await
                    .map_err(|e| e.to_string())?;
                boxed(Ok(semaphore))?
            }
            other => return Err(format!("unknown kind `{other}`")),
        });
    }
    Ok(out)
}

/// One slice: (pairs, commands per pair, server CPU per pair in µs, keys alive after it beyond
/// the objects).
async fn slice(ctx: &Ctx, kind: &str, n: usize, length: Duration) -> Result<Slice, String> {
    let cycles = cycles(ctx, kind, n).await?;
    let keys_before = ctx.probe.dbsize().await?;
    let before: ServerSnapshot = ctx.probe.snapshot().await?;
    let run = crate::workload::run(cycles, length, Duration::ZERO).await?;
    let after = ctx.probe.snapshot().await?;
    let keys_after = ctx.probe.dbsize().await?;
    let pairs = run.total().max(1) as f64;
    let commands: u64 = after
        .calls
        .iter()
        .filter(|(name, _)| name.as_str() != "info" && name.as_str() != "dbsize")
        .map(|(name, n)| n.saturating_sub(before.calls.get(name).copied().unwrap_or(0)))
        .sum();
    Ok(Slice {
        commands: commands as f64 / pairs,
        cpu_us: after.cpu_since(&before) * 1e6 / pairs,
        extra_keys: keys_after.saturating_sub(keys_before),
    })
}

struct Slice {
    commands: f64,
    cpu_us: f64,
    extra_keys: u64,
}

/// One kind's slices: CPU ratios to the PING pair, CPU per pair, commands per pair, and the
/// most keys left beyond the objects.
#[derive(Default)]
struct KindSlices {
    ratios: Vec<f64>,
    cpu: Vec<f64>,
    commands: Vec<f64>,
    extra: u64,
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub async fn run(ctx: &Ctx, records: &mut Records) -> Result<(), String> {
    let (repeats, length) = ctx.pick(
        (7, Duration::from_secs(2)),
        (3, Duration::from_millis(700)),
        (1, Duration::from_millis(300)),
    );
    let mut ping_cpu = Vec::new();
    let mut ping_commands = Vec::new();
    let mut per_kind: Vec<KindSlices> = KINDS.iter().map(|_| KindSlices::default()).collect();
    for r in 0..repeats {
        // Each kind next to a PING slice of its own, the order turning each repeat.
        for (k, kind) in KINDS.iter().enumerate() {
            let first_ping = (r + k) % 2 == 0;
            let mut ping = None;
            let mut ours = None;
            for step in 0..2 {
                let n = r * KINDS.len() * 2 + k * 2 + step;
                if (step == 0) == first_ping {
                    ping = Some(slice(ctx, PING, n, length).await?);
                } else {
                    ours = Some(slice(ctx, kind, n, length).await?);
                }
            }
            let (Some(ping), Some(ours)) = (ping, ours) else {
                return Err("a slice did not run".into());
            };
            ping_cpu.push(ping.cpu_us);
            ping_commands.push(ping.commands);
            let entry = &mut per_kind[k];
            entry.ratios.push(ours.cpu_us / ping.cpu_us.max(1e-9));
            entry.cpu.push(ours.cpu_us);
            entry.commands.push(ours.commands);
            // Each task's object keeps one retry record of this client (its count, for the
            // semaphores, was there before the slice): count what lives beyond that.
            entry.extra = entry
                .extra
                .max(ours.extra_keys.saturating_sub(TASKS as u64));
        }
        ctx.probe.flushall().await?;
    }
    let variant = |kind: &str| format!("{kind},tasks={TASKS}");
    records.push(
        SCENARIO,
        &variant("ping"),
        PING,
        "server_cpu_us_per_pair",
        median(ping_cpu),
        "us",
    );
    records.push(
        SCENARIO,
        &variant("ping"),
        PING,
        "commands_per_pair",
        median(ping_commands),
        "cmd",
    );
    for (kind, slices) in KINDS.iter().zip(per_kind) {
        let KindSlices {
            ratios,
            cpu,
            commands,
            extra,
        } = slices;
        let v = variant(kind);
        records.push(
            SCENARIO,
            &v,
            LIBRARY,
            "server_cpu_us_per_pair",
            median(cpu),
            "us",
        );
        records.push(
            SCENARIO,
            &v,
            LIBRARY,
            "server_cpu_per_pair_in_ping_pairs",
            median(ratios),
            "x",
        );
        records.push(
            SCENARIO,
            &v,
            LIBRARY,
            "commands_per_pair",
            median(commands),
            "cmd",
        );
        records.push(
            SCENARIO,
            &v,
            LIBRARY,
            "leftover_keys_after_slice",
            extra as f64,
            "keys",
        );
    }
    Ok(())
}
