//! The `rslock` crate (Redlock on one server), run in this process on the same workloads.

use std::time::Duration;

use rslock::LockManager;
use tokio::time::Instant;

use super::contended::{self, measure_with};
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
        let mut ratios = Vec::new();
        for _ in 0..rounds {
            let ours = workload::run(
                contended::ferrisson_cycles(&ctx.url, &name).await?,
                round,
                hold,
            )
            .await?;
            let theirs = workload::run(make().await?, round, hold).await?;
            ratios.push(ours.per_sec() / theirs.per_sec().max(1e-9));
        }
        ratios.sort_by(f64::total_cmp);
        let median = ratios.get(ratios.len() / 2).copied().unwrap_or(0.0);
        records.push(
            "contended",
            &hold_variant(hold),
            LIBRARY,
            "ferrisson_ratio_interleaved",
            median,
            "x",
        );
        ctx.probe.flushall().await?;
    }
    ctx.probe.flushall().await
}

/// Rounds of the head-to-head, each library's round as long as a measured phase: shorter
/// rounds favour ferrisson (rslock takes longer to reach its pace), 1 s rounds by 15-25 %.
fn head_to_head_rounds(ctx: &Ctx) -> (usize, Duration) {
    (if ctx.quick { 3 } else { 4 }, ctx.phase())
}
