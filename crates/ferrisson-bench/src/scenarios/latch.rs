//! `latch`: 1,000 waiters of 4 clients on one countdown latch; the time from the last
//! count-down to each waiter being awake (p50, p99, slowest), and subscriber connections.

use ferrisson::SyncObject;
use std::time::Duration;

use ferrisson::{Client, CountDownLatch};
use tokio::time::Instant;

use super::{CONTENDED_CLIENTS, Ctx};
use crate::record::Records;
use crate::stats::Latencies;

const WAITERS: usize = 1_000;
const VARIANT: &str = "waiters=1000";

pub async fn run(ctx: &Ctx, records: &mut Records) -> Result<(), String> {
    let name = "bench:latch";
    let mut clients = Vec::new();
    for _ in 0..CONTENDED_CLIENTS {
        clients.push(Client::connect(&ctx.url).await.map_err(|e| e.to_string())?);
    }
    let coordinator = CountDownLatch::new(&clients[0], name).map_err(|e| e.to_string())?;
    coordinator.delete().await.map_err(|e| e.to_string())?;
    coordinator
        .try_set_count(1)
        .await
        .map_err(|e| e.to_string())?;
    let mut waiters = Vec::with_capacity(WAITERS);
    for i in 0..WAITERS {
        let latch =
            CountDownLatch::new(&clients[i % clients.len()], name).map_err(|e| e.to_string())?;
        waiters.push(tokio::spawn(async move {
            latch.wait().await.map_err(|e| e.to_string())?;
            Ok::<_, String>(Instant::now())
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while clients.iter().map(|c| c.waiter_stats().1).sum::<usize>() < WAITERS {
        if Instant::now() > deadline {
            return Err("the latch waiters never all subscribed".into());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let subscribers = ctx.probe.subscriber_connections().await?;
    let opened = Instant::now();
    coordinator.count_down().await.map_err(|e| e.to_string())?;
    let mut wake = Latencies::default();
    for waiter in waiters {
        let woke = waiter.await.map_err(|e| e.to_string())??;
        wake.record(woke.saturating_duration_since(opened));
    }
    let v = VARIANT;
    records.push(
        "latch",
        v,
        "ferrisson",
        "wake_p50_us",
        wake.percentile(50.0),
        "us",
    );
    records.push(
        "latch",
        v,
        "ferrisson",
        "wake_p99_us",
        wake.percentile(99.0),
        "us",
    );
    records.push(
        "latch",
        v,
        "ferrisson",
        "wake_max_us",
        wake.percentile(100.0),
        "us",
    );
    records.push(
        "latch",
        v,
        "ferrisson",
        "subscriber_connections",
        subscribers as f64,
        "conn",
    );
    ctx.probe.flushall().await
}
