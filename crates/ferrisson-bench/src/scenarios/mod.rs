//! The named scenarios.

use std::time::Duration;

use crate::record::Records;
use crate::stats::Probe;

pub mod cluster;
pub mod contended;
pub mod external;
pub mod faster_multilock;
pub mod foreign;
pub mod latch;
pub mod lock_kinds;
pub mod processes;
pub mod rate_limiter;
pub mod raw;
pub mod redlock;
pub mod rslock_peer;
pub mod semaphore;
pub mod server_cost;
pub mod uncontended;
pub mod waiters;

/// What every scenario gets.
pub struct Ctx {
    pub url: String,
    /// `--quick` (or `--smoke`): shorter phases and fewer rounds than a full run.
    pub quick: bool,
    /// `--smoke`: every scenario once, each phase as short as still exercises it (the smoke
    /// test's check that every scenario runs and writes well-formed records; its numbers mean
    /// nothing).
    pub smoke: bool,
    pub probe: Probe,
    /// Run the node and python peers (npm `redis-semaphore`, PyPI `python-redis-lock`).
    pub external_peers: bool,
    /// `--replay FILE`: a peer's own scripts, replayed by `server-cost` beside ours.
    pub replay: Option<crate::replay::Replay>,
}

impl Ctx {
    /// `full`, `quick` or `smoke`, by the run's mode.
    pub fn pick<T>(&self, full: T, quick: T, smoke: T) -> T {
        if self.smoke {
            smoke
        } else if self.quick {
            quick
        } else {
            full
        }
    }

    /// How long one measured phase runs.
    pub fn phase(&self) -> Duration {
        self.pick(
            Duration::from_secs(5),
            Duration::from_millis(1_500),
            Duration::from_millis(300),
        )
    }

    /// How long the command-counting (MONITOR) phase runs.
    pub fn count_phase(&self) -> Duration {
        self.pick(
            Duration::from_secs(2),
            Duration::from_millis(500),
            Duration::from_millis(200),
        )
    }
}

/// The task counts of the uncontended scenario.
pub const UNCONTENDED: [(&str, usize); 3] =
    [("sequential", 1), ("tasks=64", 64), ("tasks=256", 256)];

/// Contended: this many clients, each with this many tasks, on one lock.
pub const CONTENDED_CLIENTS: usize = 4;
pub const CONTENDED_TASKS: usize = 16;
pub const HOLDS: [Duration; 2] = [Duration::ZERO, Duration::from_millis(1)];

pub fn hold_variant(hold: Duration) -> String {
    format!("hold={}ms", hold.as_millis())
}

/// Every scenario name, in run order.
pub const ALL: [&str; 14] = [
    "raw",
    "server-cost",
    "uncontended",
    "contended",
    "processes",
    "waiters",
    "foreign",
    "semaphore",
    "latch",
    "peers",
    "cluster",
    "redlock",
    "rate-limiter",
    "faster-multilock",
];

pub async fn run(name: &str, ctx: &Ctx, records: &mut Records) -> Result<(), String> {
    match name {
        "raw" => raw::run(ctx, records).await,
        "server-cost" => server_cost::run(ctx, records).await,
        "uncontended" => uncontended::run(ctx, records).await,
        "contended" => {
            contended::run(ctx, records).await?;
            lock_kinds::run(ctx, records).await
        }
        "processes" => processes::run(ctx, records).await,
        "waiters" => waiters::run(ctx, records).await,
        "foreign" => foreign::run(ctx, records).await,
        "semaphore" => semaphore::run(ctx, records).await,
        "latch" => latch::run(ctx, records).await,
        "cluster" => cluster::run(ctx, records).await,
        "redlock" => redlock::run(ctx, records).await,
        "rate-limiter" => rate_limiter::run(ctx, records).await,
        "faster-multilock" => faster_multilock::run(ctx, records).await,
        "peers" => {
            rslock_peer::run(ctx, records).await?;
            external::run(ctx, records).await
        }
        other => Err(format!(
            "unknown scenario `{other}` (known: {})",
            ALL.join(", ")
        )),
    }
}
