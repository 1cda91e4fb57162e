//! A tower-based worker that stops on Ctrl-C or SIGTERM (a deploy, `docker stop`, Kubernetes
//! ending a pod) and gives back everything it holds before it exits, so that the other
//! instances can use the partner API's capacity at once instead of after a lease.
//!
//! ```text
//! cargo run -p ferrisson-examples --example graceful_shutdown   # starts a throwaway redis-server
//! REDIS_URL=redis://127.0.0.1:6379 cargo run -p ferrisson-examples --example graceful_shutdown
//! ```
//!
//! The run starts one worker process (this same program, started with `worker`). It calls a
//! stand-in API through both limit layers, four calls at a time, built in their self-healing
//! form (`with_limit`, `with_rate`), until it is told to stop. The coordinator sends it SIGTERM
//! while its calls are in flight, then checks that it exited cleanly and that no permit of the
//! concurrency limit stayed taken.
//!
//! On the signal, the worker calls `Client::shutdown_report` with a grace of a few seconds:
//! new acquisitions are refused from then on (the call loops end with `Error::Closed`), the
//! calls in flight finish and give their permits back, and what would still be held after the
//! grace is given back by the shutdown itself. The report says what it gave back.
//!
//! Pasted into an app of your own (as `src/main.rs`), it needs:
//!
//! ```toml
//! [dependencies]
//! ferrisson = { version = "0.1", features = ["dev", "tower"] }
//! tokio = { version = "1", features = ["macros", "rt-multi-thread", "process", "signal", "time"] }
//! tower = { version = "0.5", features = ["util"] }
//! ```
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::time::Duration;

use ferrisson::dev::{BoxError, RedisServer, StandInApi};
use ferrisson::tower::{DistributedConcurrencyLimitLayer, DistributedRateLimitLayer};
use ferrisson::{Client, Error, ExpirableSemaphore, RateArgs, RateLimiter, RateType};
use tower::{Service, ServiceBuilder, ServiceExt};

const NAME: &str = "example:graceful-partner-api";
const PERMITS: u32 = 3;
const RATE: u64 = 20;
/// How long work in flight may take to finish after the signal.
const GRACE: Duration = Duration::from_secs(5);

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let mut args = std::env::args().skip(1);
    match (args.next().as_deref(), args.next()) {
        (Some("worker"), Some(url)) => worker(&url).await,
        _ => coordinator().await,
    }
}

/// The limits, in the form every instance builds them: each sets them again if Redis lost them.
fn limits(client: &Client) -> ferrisson::Result<(ExpirableSemaphore, RateLimiter)> {
    let in_flight =
        ExpirableSemaphore::new(client, &format!("{NAME}:in-flight"))?.with_limit(PERMITS)?;
    let per_second = RateArgs::new(RateType::Overall, RATE, Duration::from_secs(1));
    let rate = RateLimiter::new(client, &format!("{NAME}:rate"))?.with_rate(per_second)?;
    Ok((in_flight, rate))
}

/// Resolves on Ctrl-C, or on SIGTERM where there is one.
async fn stop_signal() {
    #[cfg(unix)]
    {
        let Ok(mut term) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        else {
            let _ = tokio::signal::ctrl_c().await;
            return;
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Whether a call ended because the client is shutting down.
fn shut_down(e: &BoxError) -> bool {
    matches!(e.downcast_ref::<Error>(), Some(Error::Closed(_)))
}

async fn worker(url: &str) -> Result<(), BoxError> {
    let client = Client::connect(url).await?;
    let (in_flight, rate) = limits(&client)?;
    let api = StandInApi::connect(url, NAME).await?;
    let partner = ServiceBuilder::new()
        .layer(DistributedConcurrencyLimitLayer::new(in_flight))
        .layer(DistributedRateLimitLayer::new(rate))
        .service_fn(move |()| {
            let api = api.clone();
            async move { api.call().await }
        });
    let mut loops = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let mut partner = partner.clone();
        loops.spawn(async move {
            let mut calls = 0u64;
            loop {
                match partner.ready().await {
                    Ok(ready) => match ready.call(()).await {
                        Ok(()) => calls += 1,
                        Err(e) => return Err(e),
                    },
                    // The shutdown refuses new permits: this loop is done.
                    Err(e) if shut_down(&e) => return Ok::<_, BoxError>(calls),
                    Err(e) => return Err(e),
                }
            }
        });
    }
    println!("worker: calling the partner API until told to stop");

    stop_signal().await;
    println!("worker: stopping; calls in flight have {GRACE:?} to finish");
    let report = client.shutdown_report(GRACE).await;
    println!("worker: shut down: {report}");
    let mut calls = 0;
    while let Some(ended) = loops.join_next().await {
        calls += ended??;
    }
    println!("worker: made {calls} calls");
    if !report.is_complete() {
        return Err(format!("the shutdown left something: {report}").into());
    }
    Ok(())
}

async fn coordinator() -> Result<(), BoxError> {
    let (server, url) = RedisServer::from_env_or_spawn()?;
    if server.is_some() {
        println!("started a throwaway redis-server at {url}");
    }
    let client = Client::connect(&url).await?;
    let (in_flight, _) = limits(&client)?;
    let api = StandInApi::connect(&url, NAME).await?;
    api.reset().await?;

    let exe = std::env::current_exe()?;
    let mut worker = tokio::process::Command::new(&exe)
        .args(["worker", &url])
        .kill_on_drop(true)
        .spawn()?;
    // Once calls are in flight (permits taken), the deploy comes.
    let deadline = tokio::time::Instant::now()
        .checked_add(Duration::from_secs(30))
        .ok_or("30 s from now is past what the clock can show")?;
    while in_flight.acquired_permits().await? == 0 || api.report().await?.calls < 10 {
        if tokio::time::Instant::now() > deadline {
            return Err("the worker made no calls within 30 s".into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pid = worker.id().ok_or("the worker has no pid")?;
    println!("coordinator: sending SIGTERM to the worker (pid {pid})");
    terminate(pid)?;
    let status = worker.wait().await?;
    if !status.success() {
        return Err(format!("the worker did not stop cleanly: {status}").into());
    }
    // Looked at right away, not after a lease: nothing stayed taken.
    let taken = in_flight.acquired_permits().await?;
    println!("coordinator: the worker exited; permits still taken: {taken} of {PERMITS}");
    if taken != 0 {
        return Err("a permit stayed taken after the worker's shutdown".into());
    }
    let report = api.report().await?;
    println!("coordinator: {report}");
    client.shutdown().await?;
    Ok(())
}

/// Sends SIGTERM to `pid` (as `kill` does; where there are no signals, ends it as Ctrl-C would
/// not reach it).
fn terminate(pid: u32) -> Result<(), BoxError> {
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("kill -TERM {pid} failed: {status}").into())
    }
}
