//! `contended` for the fair lock and the read-write lock.
//!
//! - Fair lock: the contended workload (4 clients × 16 tasks, hold 0 and 1 ms), and the FIFO
//!   check: 32 waiters of 4 clients queued in a known order, released, counted out of order.
//! - Read-write lock: read lock + unlock throughput with 64 readers of 4 clients, and the wait
//!   of one writer among them (read-heavy load).

use ferrisson::Lock;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferrisson::{Client, FairLock, ReadWriteLock};
use tokio::time::Instant;

use super::contended::{measure, record};
use super::{CONTENDED_CLIENTS, CONTENDED_TASKS, Ctx, HOLDS};
use crate::record::Records;
use crate::stats::Latencies;
use crate::workload::{self, Cycle, HoldCycle};

pub const FAIR: &str = "ferrisson-fair-lock";
pub const RWLOCK: &str = "ferrisson-rwlock";

async fn clients(url: &str) -> Result<Vec<Client>, String> {
    let mut clients = Vec::new();
    for _ in 0..CONTENDED_CLIENTS {
        clients.push(Client::connect(url).await.map_err(|e| e.to_string())?);
    }
    Ok(clients)
}

async fn fair_cycles(url: &str, name: &str) -> Result<Vec<Box<dyn Cycle>>, String> {
    let mut cycles: Vec<Box<dyn Cycle>> = Vec::new();
    for client in clients(url).await? {
        for _ in 0..CONTENDED_TASKS {
            // One owner per worker, as a long-lived worker binds one: the fair lock's
            // per-owner channel then lingers between its waits.
            let lock = FairLock::new(&client, name)
                .map_err(|e| e.to_string())?
                .owned_by(client.new_owner());
            cycles.push(Box::new(HoldCycle(lock)));
        }
    }
    Ok(cycles)
}

async fn read_cycles(url: &str, name: &str) -> Result<Vec<Box<dyn Cycle>>, String> {
    let mut cycles: Vec<Box<dyn Cycle>> = Vec::new();
    for client in clients(url).await? {
        for _ in 0..CONTENDED_TASKS {
            let lock = ReadWriteLock::new(&client, name)
                .map_err(|e| e.to_string())?
                .owned_by(client.new_owner());
            cycles.push(Box::new(HoldCycle(lock.read_lock())));
        }
    }
    Ok(cycles)
}

/// Queues 32 waiters of 4 clients one by one behind a held fair lock, releases it, and counts
/// the waiters that got it out of their queue order.
async fn fifo_inversions(url: &str, name: &str) -> Result<usize, String> {
    let clients = clients(url).await?;
    let holder = FairLock::new(&clients[0], name).map_err(|e| e.to_string())?;
    let guard = holder.lock().await.map_err(|e| e.to_string())?;
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..32 {
        let lock = FairLock::new(&clients[i % clients.len()], name).map_err(|e| e.to_string())?;
        let order = order.clone();
        tasks.push(tokio::spawn(async move {
            let guard = lock.lock().await.map_err(|e| e.to_string())?;
            order.lock().map_err(|e| e.to_string())?.push(i);
            guard.unlock().await.map_err(|e| e.to_string())
        }));
        let deadline = Instant::now() + Duration::from_secs(10);
        while holder.queue_length().await.map_err(|e| e.to_string())? < i + 1 {
            if Instant::now() > deadline {
                return Err(format!("waiter {i} never queued"));
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    guard.unlock().await.map_err(|e| e.to_string())?;
    for task in tasks {
        task.await.map_err(|e| e.to_string())??;
    }
    let order = order.lock().map_err(|e| e.to_string())?;
    Ok(order
        .iter()
        .enumerate()
        .filter(|(at, i)| *at != **i)
        .count())
}

/// One writer taking the write lock over and over among 64 readers: its waits.
async fn writer_waits(lock: ReadWriteLock, until: Instant) -> Result<Latencies, String> {
    let mut waits = Latencies::default();
    while Instant::now() < until {
        let t0 = Instant::now();
        let guard = lock.write_lock().lock().await.map_err(|e| e.to_string())?;
        waits.record(t0.elapsed());
        guard.unlock().await.map_err(|e| e.to_string())?;
        // Let the readers back in before the next write.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(waits)
}

pub async fn run(ctx: &Ctx, records: &mut Records) -> Result<(), String> {
    for hold in HOLDS {
        let name = format!("bench:contended-fair:{}", super::hold_variant(hold));
        let figures = measure(ctx, hold, || fair_cycles(&ctx.url, &name)).await?;
        record(records, hold, FAIR, &figures);
    }
    let inversions = fifo_inversions(&ctx.url, "bench:fifo").await?;
    records.push(
        "contended",
        "fifo-32-waiters",
        FAIR,
        "out_of_order",
        inversions as f64,
        "waiters",
    );
    ctx.probe.flushall().await?;

    let hold = Duration::ZERO;
    let figures = measure(ctx, hold, || read_cycles(&ctx.url, "bench:readers")).await?;
    let variant = "readers=64";
    records.push(
        "contended",
        variant,
        RWLOCK,
        "acquisitions_per_sec",
        figures.acquisitions_per_sec,
        "acq/s",
    );
    records.push(
        "contended",
        variant,
        RWLOCK,
        "p99_wait_us",
        figures.p99_wait_us,
        "us",
    );
    if let Some(c) = figures.commands_per_acquisition {
        records.push(
            "contended",
            variant,
            RWLOCK,
            "commands_per_acquisition",
            c,
            "cmd/acq",
        );
    }

    // Read-heavy: the same 64 readers, holding 1 ms each, and one writer among them.
    let readers = read_cycles(&ctx.url, "bench:read-heavy").await?;
    let writer_client = Client::connect(&ctx.url).await.map_err(|e| e.to_string())?;
    let writer =
        ReadWriteLock::new(&writer_client, "bench:read-heavy").map_err(|e| e.to_string())?;
    let phase = ctx.phase();
    let until = Instant::now() + phase;
    let (reads, waits) = tokio::join!(
        workload::run(readers, phase, Duration::from_millis(1)),
        writer_waits(writer, until)
    );
    let (reads, mut waits) = (reads?, waits?);
    let variant = "read-heavy";
    records.push(
        "contended",
        variant,
        RWLOCK,
        "read_acquisitions_per_sec",
        reads.per_sec(),
        "acq/s",
    );
    records.push(
        "contended",
        variant,
        RWLOCK,
        "writer_p50_wait_us",
        waits.percentile(50.0),
        "us",
    );
    records.push(
        "contended",
        variant,
        RWLOCK,
        "writer_p99_wait_us",
        waits.percentile(99.0),
        "us",
    );
    ctx.probe.flushall().await
}
