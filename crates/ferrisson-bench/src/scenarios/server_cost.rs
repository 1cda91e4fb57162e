//! `server-cost`: what one uncontended acquire + release costs the Redis server, per kind of
//! the Redisson layout: commands per pair (`INFO commandstats`, a script's own commands
//! included) and server CPU per pair (`INFO cpu`), next to a pair of `PING`s measured in the
//! same run. 64 tasks of one client, each on a name of its own, with call coalescing off (each
//! call its own `EVALSHA`, as Redisson sends them); each kind runs in slices alternating with
//! the `PING` pairs, and its CPU per pair is also given as the median of its per-slice ratios
//! to them. After the slices, the keys alive beyond the objects themselves (retry latches)
//! are counted.
//!
//! Each kind is held to a budget (#57): its CPU per pair at most so many times Redisson's own
//! scripts' on the same layout, or, for the fenced `Mutex`, rslock's unfenced pair (run here,
//! in rotation with the others). Redisson's scripts are not in this repository: `--replay
//! FILE` (src/replay.rs) replays them in the same slices, and the ratio is measured; without
//! it, the ratio is taken against Redisson's pair in `PING` pairs as a replay run measured it
//! (recorded below, docs/benchmarks.md).

use std::collections::BTreeMap;
use std::time::Duration;

use ferrisson::{
    Client, ClientConfig, ExpirableSemaphore, FairLock, Mutex, ReentrantLock, Semaphore,
};

use super::Ctx;
use super::rslock_peer::RslockCycle;
use crate::record::Records;
use crate::replay::{Pair, ReplayCycle};
use crate::stats::ServerSnapshot;
use crate::workload::{BoxFuture, Cycle, HoldCycle};

pub const SCENARIO: &str = "server-cost";
pub const TASKS: usize = 64;
const LIBRARY: &str = "ferrisson";
/// The reference pair's library name.
const PING: &str = "ping-pair";

/// A replayed pair whose label starts so is a floor: the base's own scripts with what
/// ferrisson's guarantees need at least, whose ratio is the budget's ceiling in the target
/// table.
pub const FLOOR: &str = "floor";
/// The budget base of the Redisson-layout kinds, as a replay file labels it.
const REDISSON: &str = "redisson";
/// The fenced mutex's base: rslock's unfenced pair.
const RSLOCK: &str = "rslock";

/// A kind measured, and what it is held to.
pub struct Kind {
    pub name: &'static str,
    /// The base its budget is a multiple of.
    pub base: &'static str,
    /// At most this many times the base's CPU per pair (#57).
    pub budget: f64,
    /// The base's CPU per pair in `PING` pairs of the same slices, as a `--replay` run of this
    /// scenario measured it (docs/benchmarks.md, "The Redisson-layout kinds against Redisson's
    /// own scripts"); `None` where the base runs in every run.
    recorded_base: Option<f64>,
}

pub const KINDS: [Kind; 6] = [
    Kind {
        name: "reentrant-lock",
        base: REDISSON,
        budget: 1.0,
        recorded_base: Some(RECORDED_REENTRANT),
    },
    Kind {
        name: "fenced-lock",
        base: REDISSON,
        budget: 1.1,
        recorded_base: Some(RECORDED_FENCED),
    },
    Kind {
        name: "fair-lock",
        base: REDISSON,
        budget: 1.0,
        recorded_base: Some(RECORDED_FAIR),
    },
    Kind {
        name: "semaphore",
        base: REDISSON,
        budget: 1.6,
        recorded_base: Some(RECORDED_SEMAPHORE),
    },
    Kind {
        name: "expirable-semaphore",
        base: REDISSON,
        budget: 1.5,
        recorded_base: Some(RECORDED_EXPIRABLE),
    },
    Kind {
        name: "fenced-mutex",
        base: RSLOCK,
        budget: 1.5,
        recorded_base: None,
    },
];

// Redisson's own pairs in PING pairs of the same slices, measured by a full `--replay` run of
// this scenario (7 alternating repeats, 2026-12-07, redis-server 7.0.15, 2 cores; Redisson's
// main branch as stored then): docs/benchmarks.md, "The Redisson-layout kinds against
// Redisson's own scripts".
const RECORDED_REENTRANT: f64 = 12.61;
const RECORDED_FENCED: f64 = 15.00;
const RECORDED_FAIR: f64 = 17.39;
const RECORDED_SEMAPHORE: f64 = 6.56;
const RECORDED_EXPIRABLE: f64 = 12.44;

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

/// What a slice runs.
#[derive(Clone, Copy)]
enum Variant<'a> {
    Ping,
    Ours,
    Rslock,
    Replayed(&'a Pair),
}

impl Variant<'_> {
    fn library(&self) -> &str {
        match self {
            Self::Ping => PING,
            Self::Ours => LIBRARY,
            Self::Rslock => RSLOCK,
            Self::Replayed(pair) => &pair.label,
        }
    }
}

async fn plain_connection(ctx: &Ctx) -> Result<redis::aio::MultiplexedConnection, String> {
    redis::Client::open(ctx.url.as_str())
        .map_err(|e| e.to_string())?
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| e.to_string())
}

/// The 64 cycles of `variant` of `kind`, each on a name of its own: ferrisson's over one
/// client that sends every call alone, the others over one plain connection (rslock: one
/// manager).
async fn cycles(
    ctx: &Ctx,
    kind: &str,
    variant: Variant<'_>,
    slice: usize,
) -> Result<Vec<Box<dyn Cycle>>, String> {
    match variant {
        Variant::Ping => {
            let con = plain_connection(ctx).await?;
            return Ok((0..TASKS)
                .map(|_| Box::new(PingCycle(con.clone())) as Box<dyn Cycle>)
                .collect());
        }
        Variant::Rslock => {
            let manager = rslock::LockManager::new(vec![ctx.url.clone()]);
            return Ok((0..TASKS)
                .map(|t| {
                    Box::new(RslockCycle {
                        manager: manager.clone(),
                        resource: format!("bench:cost:{kind}:rslock:{slice}:{t}").into_bytes(),
                    }) as Box<dyn Cycle>
                })
                .collect());
        }
        Variant::Replayed(pair) => {
            let con = plain_connection(ctx).await?;
            let mut out = Vec::with_capacity(TASKS);
            for t in 0..TASKS {
                let name = format!("bench:cost:{kind}:{}:{slice}:{t}", pair.label);
                out.push(Box::new(
                    ReplayCycle::new(
                        pair,
                        con.clone(),
                        name,
                        u32::try_from(t).map_err(|_| "too many tasks")?,
                    )
                    .await?,
                ) as Box<dyn Cycle>);
            }
            return Ok(out);
        }
        Variant::Ours => {}
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
            "fenced-mutex" => boxed(Mutex::fenced(c, &name))?,
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
async fn slice(
    ctx: &Ctx,
    kind: &str,
    variant: Variant<'_>,
    n: usize,
    length: Duration,
) -> Result<Slice, String> {
    let cycles = cycles(ctx, kind, variant, n).await?;
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

/// One variant's slices: CPU ratios to the PING pair, CPU per pair, commands per pair, and the
/// most keys left beyond the objects.
#[derive(Default)]
struct Slices {
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
    let replayed = match &ctx.replay {
        Some(replay) => {
            println!("server-cost: replaying {}", replay.source);
            replay
                .load_scripts(&mut plain_connection(ctx).await?)
                .await?
        }
        None => Vec::new(),
    };
    let mut ping = Slices::default();
    // Per kind and library, that library's slices.
    let mut measured: BTreeMap<(&str, String), Slices> = BTreeMap::new();
    for r in 0..repeats {
        for (k, kind) in KINDS.iter().enumerate() {
            let mut variants = vec![Variant::Ping, Variant::Ours];
            if kind.base == RSLOCK {
                variants.push(Variant::Rslock);
            }
            variants.extend(
                replayed
                    .iter()
                    .filter(|p| p.kind == kind.name)
                    .map(Variant::Replayed),
            );
            // Each variant next to a PING slice of the same round, the order turning each
            // repeat.
            let turn = (r + k) % variants.len();
            variants.rotate_left(turn);
            let mut got = Vec::new();
            for (step, variant) in variants.iter().enumerate() {
                let n = (r * KINDS.len() + k) * 8 + step;
                got.push((*variant, slice(ctx, kind.name, *variant, n, length).await?));
            }
            let ping_cpu = got
                .iter()
                .find(|(v, _)| matches!(v, Variant::Ping))
                .map_or(0.0, |(_, s)| s.cpu_us);
            for (variant, s) in got {
                let entry = match variant {
                    Variant::Ping => &mut ping,
                    other => measured
                        .entry((kind.name, other.library().to_owned()))
                        .or_default(),
                };
                entry.ratios.push(s.cpu_us / ping_cpu.max(1e-9));
                entry.cpu.push(s.cpu_us);
                entry.commands.push(s.commands);
                // Each task's object keeps one retry record of this client (its count, for
                // the semaphores, was there before the slice): count what lives beyond that.
                entry.extra = entry.extra.max(s.extra_keys.saturating_sub(TASKS as u64));
            }
        }
        ctx.probe.flushall().await?;
    }
    report(records, ping, measured);
    Ok(())
}

fn report(records: &mut Records, ping: Slices, measured: BTreeMap<(&str, String), Slices>) {
    let variant = |kind: &str| format!("{kind},tasks={TASKS}");
    let mut push = |v: &str, library: &str, metric: &str, value: f64, unit: &str| {
        records.push(SCENARIO, v, library, metric, value, unit);
    };
    push(
        &variant("ping"),
        PING,
        "server_cpu_us_per_pair",
        median(ping.cpu),
        "us",
    );
    push(
        &variant("ping"),
        PING,
        "commands_per_pair",
        median(ping.commands),
        "cmd",
    );
    for kind in &KINDS {
        let v = variant(kind.name);
        let base = measured.get(&(kind.name, kind.base.to_owned()));
        for ((_, library), slices) in measured.iter().filter(|((k, _), _)| *k == kind.name) {
            push(
                &v,
                library,
                "server_cpu_us_per_pair",
                median(slices.cpu.clone()),
                "us",
            );
            push(
                &v,
                library,
                "server_cpu_per_pair_in_ping_pairs",
                median(slices.ratios.clone()),
                "x",
            );
            push(
                &v,
                library,
                "commands_per_pair",
                median(slices.commands.clone()),
                "cmd",
            );
            if library == LIBRARY {
                push(
                    &v,
                    library,
                    "leftover_keys_after_slice",
                    slices.extra as f64,
                    "keys",
                );
            }
            if library == kind.base {
                continue;
            }
            // Against the base: measured in the same rounds where it ran (the median of the
            // per-round ratios), else against its recorded figure in PING pairs.
            let metric = format!("cpu_ratio_to_{}", kind.base);
            if let Some(base) = base {
                let ratios = slices
                    .cpu
                    .iter()
                    .zip(&base.cpu)
                    .map(|(a, b)| a / b.max(1e-9));
                push(&v, library, &metric, median(ratios.collect()), "x");
            } else if let (Some(recorded), LIBRARY) = (kind.recorded_base, library.as_str()) {
                let ratio = median(slices.ratios.clone()) / recorded;
                push(&v, library, &format!("{metric}_recorded"), ratio, "x");
            }
            if library == LIBRARY {
                push(
                    &v,
                    library,
                    &format!("budget_vs_{}", kind.base),
                    kind.budget,
                    "x",
                );
            }
        }
    }
}
