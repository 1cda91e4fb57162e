//! A stand-in for a third-party API whose record of the calls is kept in Redis.

use std::time::Duration;

use crate::BoxError;

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
    /// The stand-in named `name`, on the Redis at `url`. Its record is kept in the keys
    /// `<name>:calls`, `<name>:concurrent` and `<name>:most`.
    ///
    /// # Errors
    ///
    /// When the Redis cannot be reached.
    pub async fn connect(url: &str, name: &str) -> Result<Self, BoxError> {
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

    /// Forgets earlier runs' calls, runs `workers` copies of this program with `args`
    /// ([`run_workers`](crate::run_workers)) and checks the calls they made through this
    /// stand-in ([`Report::check`]): `calls` in all, at most `rate` starting within any second
    /// and at most `in_flight` at once. The report, when they held.
    ///
    /// # Errors
    ///
    /// As [`run_workers`](crate::run_workers), a Redis error, or the limit that was broken.
    pub async fn run_workers_within(
        &self,
        workers: usize,
        args: &[&str],
        calls: usize,
        rate: Option<u64>,
        in_flight: u32,
    ) -> Result<Report, BoxError> {
        self.reset().await?;
        crate::run_workers(workers, args).await?;
        let report = self.report().await?;
        report.check(calls, rate, in_flight)?;
        Ok(report)
    }

    /// Forgets earlier runs' calls.
    ///
    /// # Errors
    ///
    /// A Redis error.
    pub async fn reset(&self) -> Result<(), BoxError> {
        let _: () = redis::cmd("DEL")
            .arg(&self.keys())
            .query_async(&mut self.con.clone())
            .await?;
        Ok(())
    }

    /// One call: its start noted, then 20–80 ms.
    ///
    /// # Errors
    ///
    /// A Redis error.
    pub async fn call(&self) -> Result<(), BoxError> {
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
        // The API's own time to answer (what it is a stand-in for), not a wait for a synchronizer.
        tokio::time::sleep(Duration::from_millis(20).saturating_add(Duration::from_millis(jitter)))
            .await;
        let _: () = redis::cmd("DECR")
            .arg(&concurrent)
            .query_async(&mut con)
            .await?;
        Ok(())
    }

    /// What the calls so far looked like. `busiest_second` counts the starts within 980 ms of
    /// each other: a call notes its start a moment after its permit was given.
    ///
    /// # Errors
    ///
    /// A Redis error.
    pub async fn report(&self) -> Result<Report, BoxError> {
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

impl Report {
    /// `Ok` when there were `calls` calls, at most `rate` of them started within any second
    /// (no check for `None`) and at most `in_flight` ran at once; else what was broken.
    ///
    /// # Errors
    ///
    /// A message naming the limit that was broken.
    pub fn check(&self, calls: usize, rate: Option<u64>, in_flight: u32) -> Result<(), BoxError> {
        if self.calls != calls {
            return Err(format!("{} calls were made, not {calls}", self.calls).into());
        }
        if let Some(rate) = rate
            && self.busiest_second as u64 > rate
        {
            return Err(format!(
                "{} calls started within one second: the rate is {rate}/s",
                self.busiest_second
            )
            .into());
        }
        if self.most_in_flight > in_flight {
            return Err(format!(
                "{} calls were in flight at once: the limit is {in_flight}",
                self.most_in_flight
            )
            .into());
        }
        Ok(())
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
