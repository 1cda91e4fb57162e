//! The `rslock` crate (Redlock on one server), run in this process on the same workloads.

use std::time::Duration;

use rslock::LockManager;
use tokio::time::Instant;

use super::contended::{self, measure};
use super::uncontended::record_run;
use super::{CONTENDED_CLIENTS, CONTENDED_TASKS, Ctx, HOLDS, UNCONTENDED, hold_variant};
use crate::record::Records;
use crate::workload::{self, BoxFuture, Cycle};

pub const LIBRARY: &str = "rslock";

struct RslockCycle {
    manager: LockManager,
    resource: Vec<u8>,
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
    for (variant, tasks) in UNCONTENDED {
        let manager = LockManager::new(vec![ctx.url.clone()]);
        let cycles: Vec<Box<dyn Cycle>> = (0..tasks)
            .map(|i| {
                Box::new(RslockCycle {
                    manager: manager.clone(),
                    resource: format!("bench:rslock:{variant}:{i}").into_bytes(),
                }) as Box<dyn Cycle>
            })
            .collect();
        let mut result = workload::run(cycles, ctx.phase(), Duration::ZERO).await?;
        record_run(records, variant, LIBRARY, &mut result);
    }
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
        let figures = measure(ctx, hold, make).await?;
        contended::record(records, hold, LIBRARY, &figures);
    }
    ctx.probe.flushall().await
}
