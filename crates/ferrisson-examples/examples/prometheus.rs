//! ferrisson's metrics as Prometheus scrapes them: `metrics-exporter-prometheus` serves
//! `/metrics`, and every ferrisson metric comes with its `# HELP` text, its unit and, for the
//! time histograms (acquisition, wait, hold), buckets.
//!
//! ```text
//! cargo run -p ferrisson-examples --example prometheus             # takes locks, scrapes once, prints
//! cargo run -p ferrisson-examples --example prometheus -- --serve  # then serves until Ctrl-C
//! ```
//!
//! In a service, install the exporter first thing in `main` (before the first `Client`), and
//! point Prometheus at the listener.
//!
//! Pasted into an app of your own (as `src/main.rs`), it needs:
//!
//! ```toml
//! [dependencies]
//! ferrisson = { version = "0.1", features = ["dev", "lock", "expirable-semaphore", "metrics"] }
//! tokio = { version = "1", features = ["macros", "rt-multi-thread", "time", "signal"] }
//! metrics-exporter-prometheus = { version = "0.18", default-features = false, features = ["http-listener"] }
//! ```
#![allow(clippy::print_stdout)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use ferrisson::ExpirableSemaphore;
use ferrisson::dev::RedisServer;
use ferrisson::{AcquireOptions, Client, Lock, ReentrantLock};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};

/// Buckets for ferrisson's time histograms, in seconds: a lock taken uncontended takes under a
/// millisecond; a hold, from milliseconds to minutes.
const BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0, 300.0,
];

/// `GET /metrics` from `addr`, the body.
fn scrape(addr: SocketAddr) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    Ok(response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let serve = std::env::args().any(|a| a == "--serve");
    // A free loopback port for the listener (a service picks a fixed one, e.g. 9464).
    let addr = TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    PrometheusBuilder::new()
        .with_http_listener(addr)
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), BUCKETS)?
        .install()?;

    let (_server, url) = RedisServer::from_env_or_spawn()?;
    let client = Client::connect(&url).await?;
    let lock = ReentrantLock::new(&client, "prometheus:report")?;
    for _ in 0..3 {
        lock.with(|_| tokio::time::sleep(Duration::from_millis(20)))
            .await?;
    }
    let permits = ExpirableSemaphore::new(&client, "prometheus:api")?;
    permits.try_set_permits(2).await?;
    let permit = permits
        .acquire_with(AcquireOptions::new().with_lease(Duration::from_secs(10)))
        .await?;
    permit.release().await?;

    let body = scrape(addr)?;
    for line in body.lines().filter(|l| l.contains("ferrisson_")) {
        println!("{line}");
    }
    for needed in [
        "# HELP ferrisson_hold_seconds",
        "# TYPE ferrisson_hold_seconds histogram",
        "ferrisson_hold_seconds_bucket{kind=\"lock\"",
        "ferrisson_hold_seconds_count{kind=\"expirable_semaphore\"} 1",
        "# HELP ferrisson_acquisitions_total",
    ] {
        if !body.contains(needed) {
            return Err(format!("the scrape lacks `{needed}`").into());
        }
    }
    if serve {
        println!("serving http://{addr}/metrics until Ctrl-C");
        tokio::signal::ctrl_c().await?;
    }
    client.shutdown().await?;
    Ok(())
}
