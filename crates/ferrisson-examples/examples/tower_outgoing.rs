//! A third-party API's two limits as tower layers on an outgoing client, shared by several
//! worker processes: at most `RATE` calls per second (`DistributedRateLimitLayer`) and
//! at most `PERMITS` calls in flight (`DistributedConcurrencyLimitLayer` over a
//! permit-expirable semaphore, whose permits come back by themselves if a worker dies).
//!
//! ```text
//! cargo run -p ferrisson-examples --example tower_outgoing   # starts a throwaway redis-server
//! REDIS_URL=redis://127.0.0.1:6379 cargo run -p ferrisson-examples --example tower_outgoing
//! ```
//!
//! The run starts three worker processes (this same program, started with `worker`). Each puts
//! both layers in front of its client for the API (here a stand-in that takes 20–80 ms and
//! notes, in Redis, when each call started and how many were in flight; in a service, a
//! hyper-util client or a `service_fn` around reqwest) and fires all its calls at once. At the
//! end the coordinator checks that both limits held in every one-second window.
//!
//! The concurrency limit is the outer layer: a call first waits for its place in flight, then
//! takes its permit of the rate right before it runs. The other way round, a rate permit taken
//! first would age while its call waited for a place, and calls would bunch up past the rate.
//!
//! Pasted into an app of your own (as `src/main.rs`), it needs:
//!
//! ```toml
//! [dependencies]
//! ferrisson = { version = "0.1", features = ["dev", "tower"] }
//! tokio = { version = "1", features = ["macros", "rt-multi-thread"] }
//! tower = { version = "0.5", features = ["util"] }
//! ```
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::time::Duration;

use ferrisson::dev::{BoxError, RedisServer, StandInApi};
use ferrisson::tower::{DistributedConcurrencyLimitLayer, DistributedRateLimitLayer};
use ferrisson::{Client, ExpirableSemaphore, RateLimiter, RateType};
use tower::{Service, ServiceBuilder, ServiceExt};

/// The stand-in API's name, and its limits' names.
const API: &str = "example:tower-partner-api";
const RATE_NAME: &str = "example:tower-partner-api:rate";
const IN_FLIGHT_NAME: &str = "example:tower-partner-api:in-flight";
/// The API's limits: calls per second and calls in flight.
const RATE: u64 = 10;
const PERMITS: u32 = 3;
const WORKERS: usize = 3;
const CALLS_PER_WORKER: usize = 8;

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
        "{WORKERS} workers, {CALLS_PER_WORKER} calls each, all at once: at most {RATE}/s and {PERMITS} in flight"
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
    let in_flight = ExpirableSemaphore::new(&client, IN_FLIGHT_NAME)?;
    let rate = RateLimiter::new(&client, RATE_NAME)?;
    let api = StandInApi::connect(url, API).await?;

    // The API client with both limits in front of it. Each clone of the service takes its
    // own permits; a permit in flight goes back when the call's response future ends.
    let partner = ServiceBuilder::new()
        .layer(DistributedConcurrencyLimitLayer::new(in_flight))
        .layer(DistributedRateLimitLayer::new(rate))
        .service_fn(move |call: usize| {
            let api = api.clone();
            async move {
                api.call().await?;
                Ok::<_, BoxError>(call)
            }
        });

    let calls: Vec<_> = (0..CALLS_PER_WORKER)
        .map(|call| {
            let mut partner = partner.clone();
            tokio::spawn(async move { partner.ready().await?.call(call).await })
        })
        .collect();
    for call in calls {
        let done = call.await??;
        println!("worker {id}: call {done} done");
    }
    // Last: the releases of permits whose response futures just ended land before the exit.
    client.shutdown().await?;
    Ok(())
}
