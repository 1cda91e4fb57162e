//! A barrier across processes with a countdown latch: a coordinator waits until every worker
//! process has done its part; a worker that runs its count-down twice counts once.
//!
//! ```text
//! cargo run --example job_barrier --features latch          # starts a throwaway redis-server
//! REDIS_URL=redis://127.0.0.1:6379 cargo run --example job_barrier --features latch
//! ```
//!
//! Pasted into an app of your own (as `src/main.rs`), it needs:
//!
//! ```toml
//! [dependencies]
//! ferrisson = { version = "0.1", features = ["dev", "latch"] }
//! tokio = { version = "1", features = ["macros", "rt-multi-thread", "process", "time"] }
//! ```
#![allow(clippy::print_stdout, clippy::print_stderr)]

use ferrisson::SyncObject;
use std::process::Stdio;
use std::time::Duration;

use ferrisson::Client;
use ferrisson::CountDownLatch;
use ferrisson::dev::RedisServer;

const WORKERS: u32 = 5;
/// One name per run: a coordinator restarted within the run finds its own round (armed, or
/// completed: `status`), and the next run's barrier starts fresh under its own name.
const NAME: &str = "example:import-2026-11-30";

type AnyResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

#[tokio::main]
async fn main() -> AnyResult<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("worker") {
        return worker(&args[2], &args[3]).await;
    }
    coordinator().await
}

async fn coordinator() -> AnyResult<()> {
    let (server, url) = RedisServer::from_env_or_spawn()?;
    if server.is_some() {
        println!("started a throwaway redis-server at {url}");
    }
    let client = Client::connect(&url).await?;
    let barrier = CountDownLatch::new(&client, NAME)?;
    barrier.delete().await?; // the example runs again and again under one name: a fresh run
    if !barrier.try_set_count(WORKERS).await? {
        return Err(format!(
            "`{NAME}` is armed or completed already: {:?}",
            barrier.status().await?
        )
        .into());
    }
    println!("coordinator: waiting for {WORKERS} workers");

    let exe = std::env::current_exe()?;
    let mut workers = Vec::new();
    for id in 0..WORKERS {
        workers.push(
            tokio::process::Command::new(&exe)
                .args(["worker", &url, &id.to_string()])
                .stdout(Stdio::inherit())
                .kill_on_drop(true)
                .spawn()?,
        );
    }
    if !barrier.wait_for(Duration::from_secs(60)).await? {
        return Err("the workers did not all finish within a minute".into());
    }
    println!(
        "coordinator: all {WORKERS} distinct workers are done (count {}): proceeding",
        barrier.count().await?
    );
    for mut child in workers {
        let status = child.wait().await?;
        if !status.success() {
            return Err(format!("a worker failed: {status}").into());
        }
    }
    client.shutdown().await?;
    Ok(())
}

/// One worker process: does its part, then counts down under its own id. Worker 0 is
/// "redelivered" and counts down a second time, which does not count.
async fn worker(url: &str, id: &str) -> AnyResult<()> {
    let client = Client::connect(url).await?;
    let barrier = CountDownLatch::new(&client, NAME)?;
    let millis = 100 + 150 * id.parse::<u64>().unwrap_or(0);
    tokio::time::sleep(Duration::from_millis(millis)).await;
    let participant = format!("worker-{id}");
    let counted = barrier.count_down_once(&participant).await?;
    println!(
        "worker {id}: done ({counted:?}, left: {})",
        barrier.count().await?
    );
    if !counted.counted() {
        // Not armed yet (the coordinator arms it before starting the workers here), or
        // counted before: either way this worker's part went uncounted.
        return Err(format!("worker {id}'s count-down went nowhere: {counted:?}").into());
    }
    if id == "0" {
        let again = barrier.count_down_once(&participant).await?;
        println!(
            "worker {id}: ran again ({again:?}, left: {})",
            barrier.count().await?
        );
        if again.counted() {
            return Err("a repeated count-down counted twice".into());
        }
    }
    client.shutdown().await?;
    Ok(())
}
