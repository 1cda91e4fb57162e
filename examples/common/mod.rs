//! What the examples share: worker processes (this same program, started again with other
//! arguments), a stand-in for a third-party API that notes in Redis when each call started and
//! how many were in flight, and a plain HTTP GET.
#![allow(dead_code, reason = "each example uses a part of it")]

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Any error.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What the examples return.
pub type AnyResult<T> = Result<T, BoxError>;

/// Starts `n` copies of this program, each with `args` and then its index, their output shown;
/// waits until all have ended, and fails if one did.
pub async fn run_workers(n: usize, args: &[&str]) -> AnyResult<()> {
    let exe = std::env::current_exe()?;
    let mut workers = Vec::new();
    for id in 0..n {
        workers.push(
            tokio::process::Command::new(&exe)
                .args(args)
                .arg(id.to_string())
                .stdout(Stdio::inherit())
                .stderr(Stdio::inherit())
                .kill_on_drop(true)
                .spawn()?,
        );
    }
    for mut worker in workers {
        let status = worker.wait().await?;
        if !status.success() {
            return Err(format!("a worker failed: {status}").into());
        }
    }
    Ok(())
}

/// The stand-in's note of a call: its start (the server's clock, ms) and the calls in flight,
/// the most of them kept. One script, hashed once.
static NOTE_CALL: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| {
    redis::Script::new(
        r"
        local t = redis.call('time')
        redis.call('rpush', KEYS[1], t[1] * 1000 + math.floor(t[2] / 1000))
        local now = redis.call('incr', KEYS[2])
        if now > tonumber(redis.call('get', KEYS[3]) or '0') then
          redis.call('set', KEYS[3], now)
        end
        ",
    )
});

/// A stand-in for a third-party API, shared by every process through Redis: each call notes
/// when it started (by the Redis server's clock, the one clock all processes share) and how
/// many calls were in flight, then takes 20–80 ms.
#[derive(Clone)]
pub struct StandInApi {
    name: String,
    con: redis::aio::MultiplexedConnection,
}

/// What the calls to a [`StandInApi`] looked like.
#[derive(Debug)]
pub struct Report {
    /// How many calls were made.
    pub calls: usize,
    /// From the first call's start to the last's, in ms.
    pub span_ms: u64,
    /// The most calls that started within one second.
    pub busiest_second: usize,
    /// The most calls in flight at once.
    pub most_in_flight: u32,
}

impl StandInApi {
    /// The stand-in named `name`, on the Redis at `url`.
    pub async fn connect(url: &str, name: &str) -> AnyResult<Self> {
        let con = redis::Client::open(url)?
            .get_multiplexed_async_connection()
            .await?;
        Ok(Self {
            name: name.to_owned(),
            con,
        })
    }

    fn keys(&self) -> [String; 3] {
        let name = &self.name;
        [
            format!("{name}:calls"),
            format!("{name}:concurrent"),
            format!("{name}:most"),
        ]
    }

    /// Forgets earlier runs' calls.
    pub async fn reset(&self) -> AnyResult<()> {
        let _: () = redis::cmd("DEL")
            .arg(&self.keys())
            .query_async(&mut self.con.clone())
            .await?;
        Ok(())
    }

    /// One call.
    pub async fn call(&self) -> AnyResult<()> {
        let [calls, concurrent, most] = self.keys();
        let mut con = self.con.clone();
        let _: () = NOTE_CALL
            .key(&calls)
            .key(&concurrent)
            .key(&most)
            .invoke_async(&mut con)
            .await?;
        use std::hash::{BuildHasher, Hasher};
        let jitter = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish()
            % 60;
        tokio::time::sleep(Duration::from_millis(20 + jitter)).await;
        let _: () = redis::cmd("DECR")
            .arg(&concurrent)
            .query_async(&mut con)
            .await?;
        Ok(())
    }

    /// What the calls so far looked like. `busiest_second` counts the starts within 980 ms of
    /// each other: a call notes its start a moment after its permit was given.
    pub async fn report(&self) -> AnyResult<Report> {
        let [calls, _, most] = self.keys();
        let mut con = self.con.clone();
        let mut starts: Vec<u64> = redis::cmd("LRANGE")
            .arg(&calls)
            .arg(0)
            .arg(-1)
            .query_async(&mut con)
            .await?;
        starts.sort_unstable();
        let most_in_flight: Option<u32> =
            redis::cmd("GET").arg(&most).query_async(&mut con).await?;
        let busiest_second = starts
            .iter()
            .enumerate()
            .map(|(i, t)| starts[i..].iter().take_while(|u| **u < t + 980).count())
            .max()
            .unwrap_or(0);
        Ok(Report {
            calls: starts.len(),
            span_ms: starts
                .last()
                .zip(starts.first())
                .map_or(0, |(last, first)| last - first),
            busiest_second,
            most_in_flight: most_in_flight.unwrap_or(0),
        })
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} calls over {:.1} s; busiest second: {} calls; most in flight: {}",
            self.calls,
            self.span_ms as f64 / 1000.0,
            self.busiest_second,
            self.most_in_flight
        )
    }
}

/// `GET path` on the HTTP server at `addr`: the status code and the body.
pub async fn http_get(addr: &str, path: &str) -> AnyResult<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply).await?;
    let status = reply
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("not an HTTP reply: {reply:?}"))?;
    let body = reply
        .split_once("\r\n\r\n")
        .map_or("", |(_, body)| body)
        .to_owned();
    Ok((status, body))
}

/// An API's two limits, shared by worker processes: at most `rate` calls a second (a rate
/// limiter named `<name>:rate`) and `permits` in flight (a permit-expirable semaphore named
/// `<name>:in-flight`); the stand-in API is named `name`.
pub struct ApiLimits {
    pub name: &'static str,
    pub rate: u64,
    pub permits: u32,
}

impl ApiLimits {
    /// The rate limiter's name.
    pub fn rate_name(&self) -> String {
        format!("{}:rate", self.name)
    }

    /// The semaphore's name.
    pub fn in_flight_name(&self) -> String {
        format!("{}:in-flight", self.name)
    }

    /// This program as a worker (`worker URL ID`): the URL and the worker's index, or `None`
    /// for the coordinator.
    pub fn worker_args() -> Option<(String, String)> {
        let mut args = std::env::args().skip(1);
        match (args.next().as_deref(), args.next(), args.next()) {
            (Some("worker"), Some(url), Some(id)) => Some((url, id)),
            _ => None,
        }
    }

    /// The coordinator: sets both limits on a Redis (`REDIS_URL`, or a throwaway
    /// redis-server), runs `workers` workers, and checks that they made `workers × calls`
    /// calls within both limits.
    pub async fn coordinate(&self, workers: usize, calls: usize) -> AnyResult<()> {
        let (server, url) = ferrisson_testkit::RedisServer::from_env_or_spawn()?;
        if server.is_some() {
            println!("started a throwaway redis-server at {url}");
        }
        let client = ferrisson::Client::connect(&url).await?;
        ferrisson_rate_limiter::RateLimiter::new(&client, &self.rate_name())?
            .set_rate(
                ferrisson_rate_limiter::RateType::Overall,
                self.rate,
                Duration::from_secs(1),
            )
            .await?;
        ferrisson_expirable_semaphore::ExpirableSemaphore::new(&client, &self.in_flight_name())?
            .set_permits(self.permits)
            .await?;
        let api = StandInApi::connect(&url, self.name).await?;
        api.reset().await?;

        let (rate, permits) = (self.rate, self.permits);
        println!("{workers} workers, {calls} calls each: at most {rate}/s and {permits} at once");
        run_workers(workers, &["worker", &url]).await?;

        let report = api.report().await?;
        println!("{report} (limits: {rate}/s, {permits} at once)");
        if report.calls != workers * calls
            || report.busiest_second as u64 > rate
            || report.most_in_flight > permits
        {
            return Err("a limit was broken".into());
        }
        println!("both limits held across the {workers} processes");
        client.shutdown().await?;
        Ok(())
    }
}
