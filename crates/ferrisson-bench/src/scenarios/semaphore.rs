//! `semaphore`: 20 permits, 4 clients × 50 tasks taking one permit each, holding it 1 ms.
//! Acquisitions/s, p50/p99 wait and commands per acquisition, for the semaphore, the
//! permit-expirable semaphore (watchdog-kept permits) and npm `redis-semaphore`'s `Semaphore`.

use std::time::Duration;

use ferrisson::{Client, ExpirableSemaphore, Semaphore};

use super::contended::{Figures, measure};
use super::external::{PeerWorkload, node_peer};
use super::{CONTENDED_CLIENTS, Ctx};
use crate::record::Records;
use crate::workload::{Acquire, Cycle, HoldCycle};

pub const PERMITS: u32 = 20;
const TASKS_PER_CLIENT: usize = 50;
const HOLD: Duration = Duration::from_millis(1);
const VARIANT: &str = "permits=20,tasks=200";

fn record(records: &mut Records, library: &str, f: &Figures) {
    let s = "semaphore";
    records.push(
        s,
        VARIANT,
        library,
        "acquisitions_per_sec",
        f.acquisitions_per_sec,
        "acq/s",
    );
    records.push(s, VARIANT, library, "p50_wait_us", f.p50_wait_us, "us");
    records.push(s, VARIANT, library, "p99_wait_us", f.p99_wait_us, "us");
    if let Some(c) = f.commands_per_acquisition {
        records.push(
            s,
            VARIANT,
            library,
            "commands_per_acquisition",
            c,
            "cmd/acq",
        );
    }
    if let Some(c) = f.server_cpu_us {
        records.push(
            s,
            VARIANT,
            library,
            "server_cpu_us_per_acquisition",
            c,
            "us",
        );
    }
}

/// 200 cycles over 4 clients, on a count of 20 set afresh.
async fn cycles<S, F>(url: &str, name: &str, make: F) -> Result<Vec<Box<dyn Cycle>>, String>
where
    S: Acquire,
    F: Fn(&Client) -> ferrisson::Result<S>,
{
    let mut cycles: Vec<Box<dyn Cycle>> = Vec::new();
    let setup = Client::connect(url).await.map_err(|e| e.to_string())?;
    Semaphore::new(&setup, name)
        .map_err(|e| e.to_string())?
        .set_permits(PERMITS)
        .await
        .map_err(|e| e.to_string())?;
    for _ in 0..CONTENDED_CLIENTS {
        let client = Client::connect(url).await.map_err(|e| e.to_string())?;
        for _ in 0..TASKS_PER_CLIENT {
            cycles.push(Box::new(HoldCycle(
                make(&client).map_err(|e| e.to_string())?,
            )));
        }
    }
    Ok(cycles)
}

pub async fn run(ctx: &Ctx, records: &mut Records) -> Result<(), String> {
    let name = "bench:semaphore";
    let figures = measure(ctx, HOLD, || {
        cycles(&ctx.url, name, |c| Semaphore::new(c, name))
    })
    .await?;
    record(records, "ferrisson-semaphore", &figures);
    let name = "bench:expirable-semaphore";
    let figures = measure(ctx, HOLD, || {
        cycles(&ctx.url, name, |c| ExpirableSemaphore::new(c, name))
    })
    .await?;
    record(records, "ferrisson-expirable-semaphore", &figures);

    if !ctx.external_peers {
        println!("semaphore: the node peer skipped (--no-external-peers)");
        return Ok(());
    }
    let peer = match node_peer().await {
        Ok(peer) => peer,
        Err(reason) => {
            println!("semaphore: node peer skipped: {reason}");
            return Ok(());
        }
    };
    let workload = |duration| PeerWorkload {
        mode: "semaphore",
        clients: CONTENDED_CLIENTS,
        tasks: TASKS_PER_CLIENT,
        duration,
        hold: HOLD,
        prefix: "bench:peer-semaphore",
    };
    let report = peer.run(&ctx.url, &workload(ctx.phase())).await?;
    let counter = ctx.probe.monitor().await?;
    let counted = peer.run(&ctx.url, &workload(ctx.count_phase())).await?;
    let commands = counter.finish().await;
    let figures = Figures {
        acquisitions_per_sec: report.total as f64 / report.elapsed_s.max(1e-9),
        p50_wait_us: report.wait_p50_us,
        p99_wait_us: report.wait_p99_us,
        commands_per_acquisition: Some(commands as f64 / counted.total.max(1) as f64),
        ..Figures::default()
    };
    record(records, peer.library, &figures);
    ctx.probe.flushall().await
}
