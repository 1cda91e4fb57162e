//! At most N calls in flight to a third-party API, across worker processes, with a permit-
//! expirable semaphore; a worker killed mid-call gives its permit back by itself.
//!
//! ```text
//! cargo run --example api_concurrency_limit --features expirable-semaphore          # starts a throwaway redis-server
//! REDIS_URL=redis://127.0.0.1:6379 cargo run --example api_concurrency_limit --features expirable-semaphore
//! ```
//!
//! The run starts a small local HTTP server standing in for the API (it counts the requests
//! in flight and remembers the most it ever saw), then four worker processes (this same
//! program, started with `worker`), each making calls through the semaphore. Worker 0 is
//! killed (SIGKILL, no cleanup) in the middle of a call; its permit comes back within one
//! lease, because only its watchdog kept it.
//!
//! Pasted into an app of your own (as `src/main.rs`), it needs:
//!
//! ```toml
//! [dependencies]
//! ferrisson = { version = "0.1", features = ["dev", "expirable-semaphore"] }
//! tokio = { version = "1", features = ["macros", "rt-multi-thread", "process", "net", "io-util", "time"] }
//! ```
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ferrisson::dev::{BoxError, RedisServer, http_get};
use ferrisson::{Client, ClientConfig, ExpirableSemaphore};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

/// The limit: at most this many calls in flight.
const PERMITS: u32 = 3;
const WORKERS: usize = 4;
const CALLS_PER_WORKER: usize = 12;
/// The watchdog lease: a dead worker's permit comes back at most this long after it died.
const LEASE: Duration = Duration::from_secs(2);
const NAME: &str = "example:partner-api";

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("worker") {
        return worker(&args[2], &args[3], &args[4]).await;
    }
    coordinator().await
}

async fn connect(url: &str) -> Result<Client, BoxError> {
    Ok(Client::with_config(ClientConfig::new(url).with_lease(LEASE)).await?)
}

async fn coordinator() -> Result<(), BoxError> {
    let (server, url) = RedisServer::from_env_or_spawn()?;
    if server.is_some() {
        println!("started a throwaway redis-server at {url}");
    }
    let client = connect(&url).await?;
    let semaphore = ExpirableSemaphore::new(&client, NAME)?;
    semaphore.set_permits(PERMITS).await?;

    // The stand-in API: counts requests in flight, remembers the most.
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let api = listener.local_addr()?.to_string();
    let in_flight = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let served = Arc::new(AtomicUsize::new(0));
    tokio::spawn(serve(
        listener,
        in_flight.clone(),
        most.clone(),
        served.clone(),
    ));
    println!("stand-in API at http://{api}, limit {PERMITS} calls in flight");

    let exe = std::env::current_exe()?;
    let mut workers = Vec::new();
    for id in 0..WORKERS {
        let child = tokio::process::Command::new(&exe)
            .args(["worker", &url, &api, &id.to_string()])
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        workers.push(child);
    }

    // Kill worker 0 in the middle of its second call: SIGKILL, so nothing releases its permit.
    let mut victim = workers.remove(0);
    let stdout = victim.stdout.take().ok_or("no stdout from worker 0")?;
    let mut lines = BufReader::new(stdout).lines();
    let mut calls_started = 0;
    while let Some(line) = lines.next_line().await? {
        if line.starts_with("calling") {
            calls_started += 1;
            if calls_started == 2 {
                break;
            }
        }
    }
    victim.kill().await?;
    println!("killed worker 0 mid-call (it held a permit)");
    let killed_at = tokio::time::Instant::now();

    for mut child in workers {
        let status = child.wait().await?;
        if !status.success() {
            return Err(format!("a worker failed: {status}").into());
        }
    }
    let seen = most.load(Ordering::SeqCst);
    println!(
        "{} calls served; most in flight at once: {seen} (limit {PERMITS})",
        served.load(Ordering::SeqCst)
    );
    if seen > PERMITS as usize {
        return Err("the limit was exceeded".into());
    }

    // The killed worker's permit returns once its lease runs out.
    loop {
        let available = semaphore.available_permits().await?;
        if available == i64::from(PERMITS) {
            println!(
                "all {PERMITS} permits are back, {:.1} s after the kill (lease {} s): the killed worker's permit came back by itself",
                killed_at.elapsed().as_secs_f64(),
                LEASE.as_secs()
            );
            client.shutdown().await?;
            return Ok(());
        }
        if killed_at.elapsed() > LEASE * 5 {
            return Err(format!("only {available} of {PERMITS} permits came back").into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One worker process: calls through the semaphore, one permit per call.
async fn worker(url: &str, api: &str, id: &str) -> Result<(), BoxError> {
    let client = connect(url).await?;
    let semaphore = ExpirableSemaphore::new(&client, NAME)?;
    for _ in 0..CALLS_PER_WORKER {
        // No fixed lease: the watchdog keeps the permit while this process lives.
        let permit = semaphore.acquire().await?;
        println!("calling (worker {id}, permit {})", permit.id());
        tokio::select! {
            reason = permit.lost() => return Err(format!("permit lost: {reason}").into()),
            reply = call(api) => reply?,
        }
        permit.release().await?;
    }
    // Last: whatever releases went to the background have landed before the process ends.
    client.shutdown().await?;
    Ok(())
}

/// `GET /call` on the stand-in API.
async fn call(api: &str) -> Result<(), BoxError> {
    match http_get(api, "/call").await? {
        (200, _) => Ok(()),
        (status, body) => Err(format!("the API answered {status}: {body:?}").into()),
    }
}

/// The stand-in API: each request takes 50 ms; the most requests in flight at once is kept.
async fn serve(
    listener: TcpListener,
    in_flight: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
    served: Arc<AtomicUsize>,
) {
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            continue;
        };
        let (in_flight, most, served) = (in_flight.clone(), most.clone(), served.clone());
        tokio::spawn(async move {
            let mut request = Vec::new();
            let mut buf = [0u8; 512];
            while !request.ends_with(b"\r\n\r\n") {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(50)).await;
            in_flight.fetch_sub(1, Ordering::SeqCst);
            served.fetch_add(1, Ordering::SeqCst);
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
                .await;
        });
    }
}
