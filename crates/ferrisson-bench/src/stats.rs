//! Measuring helpers: latency percentiles, Redis-side counters, process memory.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt;

/// Latency samples in microseconds.
#[derive(Debug, Default, Clone)]
pub struct Latencies(Vec<u64>);

impl Latencies {
    pub fn record(&mut self, d: Duration) {
        self.0.push(d.as_micros().min(u128::from(u64::MAX)) as u64);
    }

    pub fn extend(&mut self, other: Latencies) {
        self.0.extend(other.0);
    }

    /// The `p`-th percentile (0..=100), in microseconds; 0 without samples.
    pub fn percentile(&mut self, p: f64) -> f64 {
        if self.0.is_empty() {
            return 0.0;
        }
        self.0.sort_unstable();
        let rank = ((p / 100.0) * (self.0.len() - 1) as f64).round() as usize;
        self.0[rank.min(self.0.len() - 1)] as f64
    }
}

/// A plain connection for reading server statistics.
pub struct Probe {
    client: redis::Client,
}

impl Probe {
    pub fn new(url: &str) -> Result<Self, String> {
        let client = redis::Client::open(url).map_err(|e| e.to_string())?;
        Ok(Self { client })
    }

    async fn conn(&self) -> Result<redis::aio::MultiplexedConnection, String> {
        self.client
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| e.to_string())
    }

    /// One section of `INFO`.
    async fn info(&self, section: &str) -> Result<String, String> {
        let mut con = self.conn().await?;
        redis::cmd("INFO")
            .arg(section)
            .query_async(&mut con)
            .await
            .map_err(|e| e.to_string())
    }

    /// `INFO commandstats` as command → calls.
    pub async fn command_calls(&self) -> Result<HashMap<String, u64>, String> {
        Ok(ferrisson_testkit::parse_command_calls(
            &self.info("commandstats").await?,
        ))
    }

    /// The time Redis spent in `commands` so far, in microseconds (`INFO commandstats`'
    /// `usec`): for the commands clients send (a script's own commands count inside its
    /// `evalsha`, and again under their own names).
    pub async fn command_usec(&self, commands: &[&str]) -> Result<f64, String> {
        Ok(parse_command_usec(
            &self.info("commandstats").await?,
            commands,
        ))
    }

    /// The server process's CPU time so far, in seconds (`INFO cpu`: user + system).
    pub async fn server_cpu(&self) -> Result<f64, String> {
        Ok(parse_server_cpu(&self.info("cpu").await?))
    }

    /// A snapshot of the server's counters: commands by name and CPU time.
    pub async fn snapshot(&self) -> Result<ServerSnapshot, String> {
        Ok(ServerSnapshot {
            calls: self.command_calls().await?,
            cpu: self.server_cpu().await?,
        })
    }

    /// How many keys the server holds.
    pub async fn dbsize(&self) -> Result<u64, String> {
        let mut con = self.conn().await?;
        redis::cmd("DBSIZE")
            .query_async(&mut con)
            .await
            .map_err(|e| e.to_string())
    }

    /// Connections with a channel or pattern subscription.
    pub async fn subscriber_connections(&self) -> Result<usize, String> {
        let mut con = self.conn().await?;
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query_async(&mut con)
            .await
            .map_err(|e| e.to_string())?;
        Ok(ferrisson_testkit::count_subscriber_connections(&list))
    }

    pub async fn flushall(&self) -> Result<(), String> {
        // Synchronous, so that no background freeing runs into the next scenario; after a
        // full uncontended run (a million unlock latches) it takes seconds, not the default
        // response timeout's half second.
        let config = redis::AsyncConnectionConfig::new()
            .set_response_timeout(Some(Duration::from_secs(120)));
        let mut con = self
            .client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(|e| e.to_string())?;
        redis::cmd("FLUSHALL")
            .query_async::<()>(&mut con)
            .await
            .map_err(|e| e.to_string())
    }

    /// Starts counting the commands clients send (`MONITOR`), leaving out the ones scripts run.
    pub async fn monitor(&self) -> Result<CommandCounter, String> {
        let monitor = self
            .client
            .get_async_monitor()
            .await
            .map_err(|e| e.to_string())?;
        let counted = Arc::new(AtomicU64::new(0));
        let seen = counted.clone();
        let task = tokio::spawn(async move {
            let mut lines = monitor.into_on_message::<String>();
            while let Some(line) = lines.next().await {
                // `<time> [<db> <addr>] "cmd" …`; commands run by scripts show `[<db> lua]`.
                if !line.contains(" lua]") {
                    seen.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        Ok(CommandCounter { counted, task })
    }
}

/// Commands counted by a `MONITOR` connection.
pub struct CommandCounter {
    counted: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl CommandCounter {
    pub fn count(&self) -> u64 {
        self.counted.load(Ordering::Relaxed)
    }

    /// Waits until the count stops moving (the monitor stream has caught up), then stops.
    pub async fn finish(self) -> u64 {
        let mut last = self.count();
        for _ in 0..50 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let now = self.count();
            if now == last {
                break;
            }
            last = now;
        }
        self.task.abort();
        last
    }
}

pub use ferrisson_testkit::total_calls;

/// `used_cpu_user` + `used_cpu_sys` of an `INFO cpu` reply, in seconds.
/// The `usec` of `commands` in an `INFO commandstats` reply, summed.
pub fn parse_command_usec(info: &str, commands: &[&str]) -> f64 {
    info.lines()
        .filter_map(|line| {
            let (name, stats) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            commands.contains(&name).then_some(())?;
            stats
                .split(',')
                .find_map(|kv| kv.strip_prefix("usec="))?
                .parse::<f64>()
                .ok()
        })
        .sum()
}

pub fn parse_server_cpu(info: &str) -> f64 {
    info.lines()
        .filter_map(|line| {
            line.strip_prefix("used_cpu_user:")
                .or_else(|| line.strip_prefix("used_cpu_sys:"))
        })
        .filter_map(|v| v.trim().parse::<f64>().ok())
        .sum()
}

/// Commands a client sends that no script can run (so that `INFO commandstats` counts, which
/// also count the commands scripts run, tell a client's requests apart): script calls,
/// subscriptions, `PING`, `SCRIPT LOAD`, transactions.
pub const CLIENT_ONLY_COMMANDS: [&str; 16] = [
    "evalsha",
    "eval",
    "evalsha_ro",
    "eval_ro",
    "fcall",
    "script|load",
    "subscribe",
    "unsubscribe",
    "psubscribe",
    "punsubscribe",
    "ssubscribe",
    "sunsubscribe",
    "ping",
    "multi",
    "exec",
    "watch",
];

/// The server's counters at one moment.
#[derive(Debug, Clone, Default)]
pub struct ServerSnapshot {
    pub calls: HashMap<String, u64>,
    /// CPU time of the server process, in seconds.
    pub cpu: f64,
}

impl ServerSnapshot {
    /// Requests clients sent between `self` and `later`: the client-only commands, plus
    /// `plain`, the plain commands the measured library sends itself and its scripts never run
    /// (rslock's `SET`).
    pub fn client_commands(&self, later: &ServerSnapshot, plain: &[&str]) -> u64 {
        CLIENT_ONLY_COMMANDS
            .iter()
            .chain(plain)
            .map(|c| {
                let count = |s: &ServerSnapshot| s.calls.get(*c).copied().unwrap_or(0);
                count(later).saturating_sub(count(self))
            })
            .sum()
    }

    /// Server CPU seconds between `self` and `later`.
    pub fn cpu_since(&self, earlier: &ServerSnapshot) -> f64 {
        (self.cpu - earlier.cpu).max(0.0)
    }
}

/// Resident memory of this process, in bytes (Linux); `None` elsewhere.
pub fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}
