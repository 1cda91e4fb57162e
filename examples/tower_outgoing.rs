//! A third-party API's two limits as tower layers on an outgoing client, shared by several
//! worker processes: at most RATE calls per second (`DistributedRateLimitLayer`) and at most
//! PERMITS calls in flight (`DistributedConcurrencyLimitLayer` over a permit-expirable
//! semaphore, whose permits come back by themselves if a worker dies).
//!
//! ```text
//! cargo run --example tower_outgoing --features tower   # starts a throwaway redis-server
//! REDIS_URL=redis://127.0.0.1:6379 cargo run --example tower_outgoing --features tower
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
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod common;

use std::time::Duration;

use common::{AnyResult, StandInApi, run_workers};
use ferrisson::Client;
use ferrisson::tower::{DistributedConcurrencyLimitLayer, DistributedRateLimitLayer};
use ferrisson_expirable_semaphore::ExpirableSemaphore;
use ferrisson_rate_limiter::{RateLimiter, RateType};
use ferrisson_testkit::RedisServer;
use tower::{Service, ServiceBuilder, ServiceExt};

/// At most this many calls per second...
const RATE: u64 = 10;
/// ...and this many at once.
const PERMITS: u32 = 3;
const WORKERS: usize = 3;
const CALLS_PER_WORKER: usize = 8;
const NAME: &str = "example:tower-partner-api";

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
    RateLimiter::new(&client, &format!("{NAME}:rate"))?
        .set_rate(RateType::Overall, RATE, Duration::from_secs(1))
        .await?;
    ExpirableSemaphore::new(&client, &format!("{NAME}:in-flight"))?
        .set_permits(PERMITS)
        .await?;
    let api = StandInApi::connect(&url, NAME).await?;
    api.reset().await?;

    println!(
        "{WORKERS} workers, {CALLS_PER_WORKER} calls each, all at once: at most {RATE}/s and {PERMITS} in flight"
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
    println!("both limits held across the {WORKERS} processes");
    client.shutdown().await?;
    Ok(())
}

async fn worker(url: &str, id: &str) -> AnyResult<()> {
    let client = Client::connect(url).await?;
    let in_flight = ExpirableSemaphore::new(&client, &format!("{NAME}:in-flight"))?;
    let rate = RateLimiter::new(&client, &format!("{NAME}:rate"))?;
    let api = StandInApi::connect(url, NAME).await?;

    // The API client with both limits in front of it. Each clone of the service takes its
    // own permits; a permit in flight goes back when the call's response future ends.
    let partner = ServiceBuilder::new()
        .layer(DistributedConcurrencyLimitLayer::new(in_flight))
        .layer(DistributedRateLimitLayer::new(rate))
        .service_fn(move |call: usize| {
            let api = api.clone();
            async move {
                api.call().await?;
                Ok::<_, common::BoxError>(call)
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
