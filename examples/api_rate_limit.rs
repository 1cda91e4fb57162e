//! A third-party API's two limits, shared by several worker processes: at most `LIMITS.rate`
//! calls per second (a rate limiter) and at most `LIMITS.permits` calls in flight (a
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
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod common;

use common::{AnyResult, ApiLimits, StandInApi};
use ferrisson::Client;
use ferrisson::ExpirableSemaphore;
use ferrisson::RateLimiter;

/// The API's limits: `rate` calls per second and `permits` in flight.
const LIMITS: ApiLimits = ApiLimits {
    name: "example:partner-api",
    rate: 8,
    permits: 3,
};
const WORKERS: usize = 4;
const CALLS_PER_WORKER: usize = 6;

#[tokio::main]
async fn main() -> AnyResult<()> {
    match ApiLimits::worker_args() {
        Some((url, id)) => worker(&url, &id).await,
        None => LIMITS.coordinate(WORKERS, CALLS_PER_WORKER).await,
    }
}

async fn worker(url: &str, id: &str) -> AnyResult<()> {
    let client = Client::connect(url).await?;
    let limiter = RateLimiter::new(&client, &LIMITS.rate_name())?;
    let semaphore = ExpirableSemaphore::new(&client, &LIMITS.in_flight_name())?;
    let api = StandInApi::connect(url, LIMITS.name).await?;
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
