//! A third-party API's two limits as tower layers on an outgoing client, shared by several
//! worker processes: at most `LIMITS.rate` calls per second (`DistributedRateLimitLayer`) and
//! at most `LIMITS.permits` calls in flight (`DistributedConcurrencyLimitLayer` over a
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
#![allow(clippy::print_stdout, clippy::print_stderr)]

#[path = "../../../examples/common/mod.rs"]
mod common;

use common::{AnyResult, ApiLimits, StandInApi};
use ferrisson::Client;
use ferrisson::ExpirableSemaphore;
use ferrisson::RateLimiter;
use ferrisson::tower::{DistributedConcurrencyLimitLayer, DistributedRateLimitLayer};
use tower::{Service, ServiceBuilder, ServiceExt};

/// The API's limits: `rate` calls per second and `permits` in flight.
const LIMITS: ApiLimits = ApiLimits {
    name: "example:tower-partner-api",
    rate: 10,
    permits: 3,
};
const WORKERS: usize = 3;
const CALLS_PER_WORKER: usize = 8;

#[tokio::main]
async fn main() -> AnyResult<()> {
    match ApiLimits::worker_args() {
        Some((url, id)) => worker(&url, &id).await,
        None => LIMITS.coordinate(WORKERS, CALLS_PER_WORKER).await,
    }
}

async fn worker(url: &str, id: &str) -> AnyResult<()> {
    let client = Client::connect(url).await?;
    let in_flight = ExpirableSemaphore::new(&client, &LIMITS.in_flight_name())?;
    let rate = RateLimiter::new(&client, &LIMITS.rate_name())?;
    let api = StandInApi::connect(url, LIMITS.name).await?;

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
