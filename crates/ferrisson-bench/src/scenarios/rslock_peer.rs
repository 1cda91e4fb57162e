//! The `rslock` crate (Redlock on one server), run in this process on the same workloads.

use std::time::Duration;

use rslock::LockManager;
use tokio::time::Instant;

use super::contended::{self, measure_with};
use super::uncontended::median;
use super::{CONTENDED_CLIENTS, CONTENDED_TASKS, Ctx, HOLDS, hold_variant};
use crate::record::Records;
use crate::workload::{self, BoxFuture, Cycle};

pub const LIBRARY: &str = "rslock";

/// One rslock acquire-hold-release cycle on `resource` (also the `redlock` scenario's peer).
pub(crate) struct RslockCycle {
    pub(crate) manager: LockManager,
    pub(crate) resource: Vec<u8>,
}

impl Cycle for RslockCycle {
    fn cycle(&self, hold: Duration) -> BoxFuture<'_, Result<Duration, String>> {
        Box::pin(async move {
            let t0 = Instant::now();
            // `acquire_no_guard` loops until it gets the lock, as its users' code does.
            let lock = self
                .manager
                .acquire_no_guard(self.resource.as_slice(), Duration::from_secs(10))
                .await
                .map_err(|e| format!("rslock: {e:?}"))?;
            let waited = t0.elapsed();
            workload::hold_for(hold).await?;
            self.manager.unlock(&lock).await;
            Ok(waited)
        })
    }
}

pub async fn run(ctx: &Ctx, records: &mut Records) -> Result<(), String> {
    // Its uncontended figures come from the `uncontended` scenario's alternating rounds.
    for hold in HOLDS {
        let resource = format!("bench:rslock:contended:{}", hold_variant(hold)).into_bytes();
        let make = || async {
            let mut cycles: Vec<Box<dyn Cycle>> = Vec::new();
            for _ in 0..CONTENDED_CLIENTS {
                let manager = LockManager::new(vec![ctx.url.clone()]);
                for _ in 0..CONTENDED_TASKS {
                    cycles.push(Box::new(RslockCycle {
                        manager: manager.clone(),
                        resource: resource.clone(),
                    }));
                }
            }
            Ok(cycles)
        };
        let figures = measure_with(ctx, hold, &["set"], make).await?;
        contended::record(records, hold, LIBRARY, &figures);
        // Head to head: the two libraries' phases run minutes apart above, and this machine
        // drifts by more than the gap between them. Alternating rounds see the same machine;
        // the median of the per-round ratios is the comparison.
        let (rounds, round) = head_to_head_rounds(ctx);
        let name = format!("bench:contended-h2h:{}", hold_variant(hold));
        let mutex_name = format!("bench:contended-h2h-mutex:{}", hold_variant(hold));
        let (mut ratios, mut ceiling_ratios, mut ceiling_rates) =
            (Vec::new(), Vec::new(), Vec::new());
        let mut mutex_ratios = Vec::new();
        let ceiling_cons = ceiling_connections(std::slice::from_ref(&ctx.url)).await?;
        for r in 0..rounds {
            // Who goes first goes round, as in the other head-to-head comparisons: the
            // reentrant lock, the lean mutex, rslock.
            let mut sides = workload::in_rotation(
                r,
                vec![
                    Box::pin(async {
                        let cycles = contended::ferrisson_cycles(&ctx.url, &name).await?;
                        workload::run(cycles, round, hold).await
                    }),
                    Box::pin(async {
                        let cycles = super::lock_kinds::kind_cycles(&ctx.url, |client| {
                            ferrisson::Mutex::new(client, &mutex_name)
                        })
                        .await?;
                        workload::run(cycles, round, hold).await
                    }),
                    Box::pin(async { workload::run(make().await?, round, hold).await }),
                ],
            )
            .await?
            .into_iter();
            let (Some(ours), Some(lean), Some(theirs)) = (sides.next(), sides.next(), sides.next())
            else {
                return Err("a round came back short".to_owned());
            };
            ratios.push(ours.per_sec() / theirs.per_sec().max(1e-9));
            mutex_ratios.push(lean.per_sec() / theirs.per_sec().max(1e-9));
            let ceiling = handoff_ceiling(&ceiling_cons, hold, round.min(HANDOFF_ROUND)).await?;
            ceiling_ratios.push(ceiling / theirs.per_sec().max(1e-9));
            ceiling_rates.push(ceiling);
        }
        let variant = hold_variant(hold);
        records.push(
            "contended",
            &variant,
            LIBRARY,
            "ferrisson_ratio_interleaved",
            median(ratios),
            "x",
        );
        records.push(
            "contended",
            &variant,
            LIBRARY,
            "mutex_ratio_interleaved",
            median(mutex_ratios),
            "x",
        );
        records.push(
            "contended",
            &variant,
            HANDOFF_CEILING,
            "acquisitions_per_sec",
            median(ceiling_rates),
            "acq/s",
        );
        records.push(
            "contended",
            &variant,
            HANDOFF_CEILING,
            "ratio_to_rslock",
            median(ceiling_ratios),
            "x",
        );
        ctx.probe.flushall().await?;
    }
    ctx.probe.flushall().await
}

/// The library name of the hand-off ceiling's records.
pub const HANDOFF_CEILING: &str = "hand-off ceiling";

/// How long one round of the hand-off ceiling runs at most (a serial loop settles fast).
pub(crate) const HANDOFF_ROUND: Duration = Duration::from_millis(500);

/// The hand-off ceiling: the most acquisitions per second one lock allows when each holder
/// holds for `hold` (the harness's own hold) and the next one has it after a single round trip
/// to Redis (a `PING` to each of `cons` at once, one server for a lock, every instance for a
/// RedLock: cheaper than any script that moves a lock), one after another. No lock library can
/// pass it: a lock held by one owner at a time changes hands through Redis.
pub(crate) async fn handoff_ceiling(
    cons: &[redis::aio::MultiplexedConnection],
    hold: Duration,
    round: Duration,
) -> Result<f64, String> {
    let started = Instant::now();
    let mut n = 0u64;
    while started.elapsed() < round {
        workload::hold_for(hold).await?;
        futures::future::try_join_all(cons.iter().map(|con| async move {
            redis::cmd("PING")
                .query_async::<String>(&mut con.clone())
                .await
                .map_err(|e| e.to_string())
        }))
        .await?;
        n += 1;
    }
    Ok(n as f64 / started.elapsed().as_secs_f64().max(1e-9))
}

/// A multiplexed connection to each of `urls`, for [`handoff_ceiling`].
pub(crate) async fn ceiling_connections(
    urls: &[String],
) -> Result<Vec<redis::aio::MultiplexedConnection>, String> {
    let mut cons = Vec::new();
    for url in urls {
        cons.push(
            redis::Client::open(url.as_str())
                .map_err(|e| e.to_string())?
                .get_multiplexed_async_connection()
                .await
                .map_err(|e| e.to_string())?,
        );
    }
    Ok(cons)
}

/// Rounds of the head-to-head, each library's round as long as a measured phase: shorter
/// rounds favour ferrisson (rslock takes longer to reach its pace), 1 s rounds by 15-25 %.
fn head_to_head_rounds(ctx: &Ctx) -> (usize, Duration) {
    (ctx.pick(4, 3, 1), ctx.phase())
}
