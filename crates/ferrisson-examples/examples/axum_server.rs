//! Incoming requests limited across two axum server processes: at most PERMITS requests in
//! flight on both servers together (`DistributedConcurrencyLimitLayer` on each router, over one
//! permit-expirable semaphore), and a request that cannot get a place within MAX_WAIT shed
//! with `503 Service Unavailable` and a `Retry-After`.
//!
//! ```text
//! cargo run -p ferrisson-examples --example axum_server   # starts a throwaway redis-server
//! REDIS_URL=redis://127.0.0.1:6379 cargo run -p ferrisson-examples --example axum_server
//! ```
//!
//! The run starts two server processes (this same program, started with `server`); each
//! handles `GET /report` by calling a backend that takes 20–80 ms (a stand-in that notes, in
//! Redis, how many calls were in flight). Then:
//!
//! 1. while the coordinator holds every permit itself (say, a maintenance window), requests
//!    to either server wait MAX_WAIT and are shed with 503;
//! 2. it gives them back and sends a burst of requests to both servers at once: each server
//!    gets twice the limit at once, and the backend never sees more than PERMITS in flight.
//!
//! A server stops gracefully when its standard input closes.
//!
//! Pasted into an app of your own (as `src/main.rs`), it needs:
//!
//! ```toml
//! [dependencies]
//! ferrisson = { version = "0.1", features = ["dev", "expirable-semaphore", "tower"] }
//! tokio = { version = "1", features = ["macros", "rt-multi-thread", "process", "net", "io-util", "io-std", "time"] }
//! tower = { version = "0.5", features = ["util"] }
//! axum = { version = "0.8", default-features = false, features = ["tokio", "http1"] }
//! ```
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::process::Stdio;
use std::time::Duration;

use axum::Router;
use axum::error_handling::HandleErrorLayer;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use ferrisson::Client;
use ferrisson::ExpirableSemaphore;
use ferrisson::dev::{BoxError, RedisServer, StandInApi, http_get};
use ferrisson::tower::{DistributedConcurrencyLimitLayer, LimitExceeded};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tower::ServiceBuilder;

/// At most this many requests in flight on both servers together.
const PERMITS: u32 = 3;
/// How long a request waits for its place before it is shed.
const MAX_WAIT: Duration = Duration::from_secs(2);
/// Requests to each server in the burst: twice the limit.
const BURST_PER_SERVER: usize = 2 * PERMITS as usize;
const NAME: &str = "example:axum-reports";

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().collect();
    match (args.get(1).map(String::as_str), args.get(2)) {
        (Some("server"), Some(url)) => server(url).await,
        _ => coordinator().await,
    }
}

/// One server process: prints `listening on ADDR`, serves until its standard input closes.
async fn server(url: &str) -> Result<(), BoxError> {
    let client = Client::connect(url).await?;
    let in_flight = ExpirableSemaphore::new(&client, &format!("{NAME}:in-flight"))?;
    let backend = StandInApi::connect(url, NAME).await?;

    let app = Router::new()
        .route(
            "/report",
            get(move || {
                let backend = backend.clone();
                async move {
                    match backend.call().await {
                        Ok(()) => (StatusCode::OK, "report ready\n").into_response(),
                        Err(e) => (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
                    }
                }
            }),
        )
        // The layer's errors become responses: a shed request is a 503 with a Retry-After,
        // anything else (Redis unreachable, …) a 500.
        .layer(
            ServiceBuilder::new()
                .layer(HandleErrorLayer::new(shed))
                .layer(DistributedConcurrencyLimitLayer::new(in_flight).with_max_wait(MAX_WAIT)),
        );

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    println!("listening on {}", listener.local_addr()?);
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let mut rest = Vec::new();
            let _ = tokio::io::stdin().read_to_end(&mut rest).await;
        })
        .await?;
    // Last: whatever releases went to the background land before the process ends.
    client.shutdown().await?;
    Ok(())
}

/// The response for a request the limit let through with an error.
async fn shed(error: BoxError) -> Response {
    if error.is::<LimitExceeded>() {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "1")],
            "busy, try again\n",
        )
            .into_response()
    } else {
        (StatusCode::INTERNAL_SERVER_ERROR, error.to_string()).into_response()
    }
}

async fn coordinator() -> Result<(), BoxError> {
    let (redis, url) = RedisServer::from_env_or_spawn()?;
    if redis.is_some() {
        println!("started a throwaway redis-server at {url}");
    }
    let client = Client::connect(&url).await?;
    let in_flight = ExpirableSemaphore::new(&client, &format!("{NAME}:in-flight"))?;
    in_flight.set_permits(PERMITS).await?;
    let backend = StandInApi::connect(&url, NAME).await?;
    backend.reset().await?;

    // Two server processes, each telling where it listens.
    let exe = std::env::current_exe()?;
    let mut servers = Vec::new();
    let mut addrs = Vec::new();
    for _ in 0..2 {
        let mut child = tokio::process::Command::new(&exe)
            .args(["server", &url])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child.stdout.take().ok_or("no stdout from a server")?;
        let line = BufReader::new(stdout)
            .lines()
            .next_line()
            .await?
            .ok_or("a server ended before it listened")?;
        let addr = line
            .strip_prefix("listening on ")
            .ok_or_else(|| format!("a server said {line:?}"))?;
        addrs.push(addr.to_owned());
        servers.push(child);
    }
    println!(
        "two servers at {} and {}, {PERMITS} requests in flight between them",
        addrs[0], addrs[1]
    );

    // 1. Every permit taken elsewhere: both servers shed after MAX_WAIT.
    let mut held = Vec::new();
    for _ in 0..PERMITS {
        held.push(in_flight.acquire().await?);
    }
    let shed = burst(&addrs, 1).await?;
    println!("with every permit taken elsewhere: {shed:?} (status, count)");
    if shed != [(503, 2)] {
        return Err("the servers did not shed while every permit was taken".into());
    }
    for permit in held {
        permit.release().await?;
    }

    // 2. A burst of twice the limit at each server: all served, never above the limit.
    let served = burst(&addrs, BURST_PER_SERVER).await?;
    let report = backend.report().await?;
    println!(
        "a burst of {BURST_PER_SERVER} requests at each server: {served:?} (status, count); {report}"
    );
    if served != [(200, 2 * BURST_PER_SERVER)] || report.most_in_flight > PERMITS {
        return Err("the shared limit did not hold".into());
    }
    println!(
        "the limit held across both servers: at most {} of {PERMITS} in flight",
        report.most_in_flight
    );

    // Close each server's standard input: it stops gracefully.
    for mut server in servers {
        drop(server.stdin.take());
        let status = server.wait().await?;
        if !status.success() {
            return Err(format!("a server failed: {status}").into());
        }
    }
    client.shutdown().await?;
    Ok(())
}

/// `per_server` requests to each server, all at once: how many got each status.
async fn burst(addrs: &[String], per_server: usize) -> Result<Vec<(u16, usize)>, BoxError> {
    let requests: Vec<_> = addrs
        .iter()
        .flat_map(|addr| std::iter::repeat_n(addr.clone(), per_server))
        .map(|addr| tokio::spawn(async move { http_get(&addr, "/report").await }))
        .collect();
    let mut counts = std::collections::BTreeMap::new();
    for request in requests {
        let (status, _) = request.await??;
        *counts.entry(status).or_insert(0) += 1;
    }
    Ok(counts.into_iter().collect())
}
