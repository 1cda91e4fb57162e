//! A third-party API's two limits, shared by several worker processes: at most RATE calls per
//! second (a rate limiter) and at most PERMITS calls in flight (a permit-expirable semaphore).
//!
//! ```text
//! cargo run --example api_rate_limit          # starts a throwaway redis-server
//! REDIS_URL=redis://127.0.0.1:6379 cargo run --example api_rate_limit
//! ```
//!
//! The run starts four worker processes (this same program, started with `worker`). Each makes
//! calls to a stand-in for the API, which takes a random 20–80 ms and notes, in Redis, when each
//! call started (by the server's clock) and how many were in flight. At the end the coordinator
//! checks both limits held in every one-second window.
//!
//! Each call takes its place in flight first, then its permit of the rate right before it
//! starts: a rate permit taken first would age while the call waits for a place.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod common;

use std::time::Duration;

use common::{AnyResult, StandInApi, run_workers};
use ferrisson::Client;
use ferrisson_expirable_semaphore::ExpirableSemaphore;
use ferrisson_rate_limiter::{RateLimiter, RateType};
use ferrisson_testkit::RedisServer;

/// At most this many calls per second...
const RATE: u64 = 8;
/// ...and this many at once.
const PERMITS: u32 = 3;
const WORKERS: usize = 4;
const CALLS_PER_WORKER: usize = 6;
const NAME: &str = "example:partner-api";

#[tokio::main]
async fn main() -> AnyResult<()> {
    let args: Vec<String> = std::env::args().collect();
    match (args.get(1).map(String::as_str), args.get(2), args.get(3)) {
        (Some("worker"), Some(url), Some(id)) => worker(url, id).await,
        _ => coordinator().await,
    }
}

async fn coordinator() -> AnyResult<()> {
    let (server, url) = RedisServer::from_env_or_spawn()?;
    if server.is_some() {
        println!("started a throwaway redis-server at {url}");
    }
    let client = Client::connect(&url).await?;
    RateLimiter::new(&client, NAME)?
        .set_rate(RateType::Overall, RATE, Duration::from_secs(1))
        .await?;
    ExpirableSemaphore::new(&client, &format!("{NAME}:in-flight"))?
        .set_permits(PERMITS)
        .await?;
    let api = StandInApi::connect(&url, NAME).await?;
    api.reset().await?;

    println!(
        "{WORKERS} workers, {CALLS_PER_WORKER} calls each: at most {RATE}/s and {PERMITS} at once"
    );
    run_workers(WORKERS, &["worker", &url]).await?;

    let report = api.report().await?;
    println!("{report} (limits: {RATE}/s, {PERMITS} at once)");
    if report.calls != WORKERS * CALLS_PER_WORKER
        || report.busiest_second as u64 > RATE
        || report.most_in_flight > PERMITS
    {
        return Err("a limit was broken".into());
    }
    println!("both limits held");
    client.shutdown().await?;
    Ok(())
}

async fn worker(url: &str, id: &str) -> AnyResult<()> {
    let client = Client::connect(url).await?;
    let limiter = RateLimiter::new(&client, NAME)?;
    let semaphore = ExpirableSemaphore::new(&client, &format!("{NAME}:in-flight"))?;
    let api = StandInApi::connect(url, NAME).await?;
    for call in 0..CALLS_PER_WORKER {
        // First a place among the calls in flight, then the rate's permit, right before the
        // call (a rate permit taken first would age while waiting for the place).
        let permit = semaphore.acquire().await?;
        limiter.acquire(1).await?;
        api.call().await?;
        permit.release().await?;
        println!("worker {id}: call {call} done");
    }
    client.shutdown().await?;
    Ok(())
}
