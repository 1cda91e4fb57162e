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

    /// `INFO commandstats` as command → calls.
    pub async fn command_calls(&self) -> Result<HashMap<String, u64>, String> {
        let mut con = self.conn().await?;
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut con)
            .await
            .map_err(|e| e.to_string())?;
        Ok(ferrisson_testkit::parse_command_calls(&info))
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
