//! A third-party API's two limits, shared by several worker processes: at most `RATE` calls
//! per second (a rate limiter) and at most `PERMITS` calls in flight (a
//! permit-expirable semaphore).
//!
//! ```text
//! cargo run --example api_rate_limit --features expirable-semaphore,rate-limiter          # starts a throwaway redis-server
//! REDIS_URL=redis://127.0.0.1:6379 cargo run --example api_rate_limit --features expirable-semaphore,rate-limiter
//! ```
//!
//! The run starts four worker processes (this same program, started with `worker`). Each makes
//! calls to a stand-in for the API, which takes a random 20–80 ms and notes, in Redis, when each
//! call started (by the server's clock) and how many were in flight. At the end the coordinator
//! checks both limits held in every one-second window.
//!
//! Each call takes its place in flight first, then its permit of the rate right before it
//! starts: a rate permit taken first would age while the call waits for a place.
//!
//! Pasted into an app of your own (as `src/main.rs`), it needs:
//!
//! ```toml
//! [dependencies]
//! ferrisson = { version = "0.1", features = ["dev", "expirable-semaphore", "rate-limiter"] }
//! tokio = { version = "1", features = ["macros", "rt-multi-thread"] }
//! ```
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::time::Duration;

use ferrisson::dev::{BoxError, RedisServer, StandInApi};
use ferrisson::{Client, ExpirableSemaphore, RateLimiter, RateType};

/// The stand-in API's name, and its limits' names.
const API: &str = "example:partner-api";
const RATE_NAME: &str = "example:partner-api:rate";
const IN_FLIGHT_NAME: &str = "example:partner-api:in-flight";
/// The API's limits: calls per second and calls in flight.
const RATE: u64 = 8;
const PERMITS: u32 = 3;
const WORKERS: usize = 4;
const CALLS_PER_WORKER: usize = 6;

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().collect();
    match args.as_slice() {
        [_, role, url, id] if role == "worker" => worker(url, id).await,
        _ => coordinator().await,
    }
}

/// Sets both limits on a Redis (`REDIS_URL`, or a throwaway redis-server), runs the workers,
/// and checks that they made all their calls within both limits.
async fn coordinator() -> Result<(), BoxError> {
    let (server, url) = RedisServer::from_env_or_spawn()?;
    if server.is_some() {
        println!("started a throwaway redis-server at {url}");
    }
    let client = Client::connect(&url).await?;
    RateLimiter::new(&client, RATE_NAME)?
        .set_rate(RateType::Overall, RATE, Duration::from_secs(1))
        .await?;
    ExpirableSemaphore::new(&client, IN_FLIGHT_NAME)?
        .set_permits(PERMITS)
        .await?;
    let api = StandInApi::connect(&url, API).await?;
    println!(
        "{WORKERS} workers, {CALLS_PER_WORKER} calls each: at most {RATE}/s and {PERMITS} in flight"
    );
    let args = ["worker", url.as_str()];
    let calls = WORKERS * CALLS_PER_WORKER;
    let report = api
        .run_workers_within(WORKERS, &args, calls, Some(RATE), PERMITS)
        .await?;
    println!("{report}");
    println!("both limits held across the {WORKERS} processes");
    client.shutdown().await?;
    Ok(())
}

async fn worker(url: &str, id: &str) -> Result<(), BoxError> {
    let client = Client::connect(url).await?;
    let limiter = RateLimiter::new(&client, RATE_NAME)?;
    let semaphore = ExpirableSemaphore::new(&client, IN_FLIGHT_NAME)?;
    let api = StandInApi::connect(url, API).await?;
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
