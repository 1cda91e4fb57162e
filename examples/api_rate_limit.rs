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

use std::process::Stdio;
use std::time::Duration;

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

type AnyResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

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
    let mut con = redis::Client::open(url.as_str())?
        .get_multiplexed_async_connection()
        .await?;
    let _: () = redis::cmd("DEL")
        .arg(format!("{NAME}:calls"))
        .arg(format!("{NAME}:concurrent"))
        .arg(format!("{NAME}:most"))
        .query_async(&mut con)
        .await?;

    println!(
        "{WORKERS} workers, {CALLS_PER_WORKER} calls each: at most {RATE}/s and {PERMITS} at once"
    );
    let exe = std::env::current_exe()?;
    let mut workers = Vec::new();
    for id in 0..WORKERS {
        workers.push(
            tokio::process::Command::new(&exe)
                .arg("worker")
                .arg(&url)
                .arg(id.to_string())
                .stdout(Stdio::inherit())
                .stderr(Stdio::inherit())
                .spawn()?,
        );
    }
    for mut worker in workers {
        let status = worker.wait().await?;
        if !status.success() {
            return Err(format!("a worker failed: {status}").into());
        }
    }

    let mut starts: Vec<u64> = redis::cmd("LRANGE")
        .arg(format!("{NAME}:calls"))
        .arg(0)
        .arg(-1)
        .query_async(&mut con)
        .await?;
    starts.sort_unstable();
    let most_in_flight: u32 = redis::cmd("GET")
        .arg(format!("{NAME}:most"))
        .query_async(&mut con)
        .await?;
    // In any second (less 20 ms: a call notes its start a moment after its permit was given).
    let busiest_second = starts
        .iter()
        .enumerate()
        .map(|(i, t)| starts[i..].iter().take_while(|u| **u < t + 980).count())
        .max()
        .unwrap_or(0);
    println!(
        "{} calls over {:.1} s; busiest second: {busiest_second} calls (limit {RATE}); most in flight: {most_in_flight} (limit {PERMITS})",
        starts.len(),
        starts.last().zip(starts.first()).map_or(0, |(l, f)| l - f) as f64 / 1000.0,
    );
    if starts.len() != WORKERS * CALLS_PER_WORKER
        || busiest_second as u64 > RATE
        || most_in_flight > PERMITS
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
    let mut con = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    for call in 0..CALLS_PER_WORKER {
        // First a place among the calls in flight, then the rate's permit, right before the
        // call (a rate permit taken first would age while waiting for the place).
        let permit = semaphore.acquire().await?;
        limiter.acquire(1).await?;
        call_the_api(&mut con).await?;
        permit.release().await?;
        println!("worker {id}: call {call} done");
    }
    client.shutdown().await?;
    Ok(())
}

/// The stand-in API: notes when the call started (the server's clock, ms) and how many calls
/// are in flight, then takes 20–80 ms.
async fn call_the_api(con: &mut redis::aio::MultiplexedConnection) -> AnyResult<()> {
    let script = redis::Script::new(
        r"
        local t = redis.call('time')
        redis.call('rpush', KEYS[1], t[1] * 1000 + math.floor(t[2] / 1000))
        local now = redis.call('incr', KEYS[2])
        if now > tonumber(redis.call('get', KEYS[3]) or '0') then
          redis.call('set', KEYS[3], now)
        end
        ",
    );
    let _: () = script
        .key(format!("{NAME}:calls"))
        .key(format!("{NAME}:concurrent"))
        .key(format!("{NAME}:most"))
        .invoke_async(con)
        .await?;
    use std::hash::{BuildHasher, Hasher};
    let jitter = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
        % 60;
    tokio::time::sleep(Duration::from_millis(20 + jitter)).await;
    let _: () = redis::cmd("DECR")
        .arg(format!("{NAME}:concurrent"))
        .query_async(con)
        .await?;
    Ok(())
}
