//! A local Redis Cluster of `redis-server` processes: 3 primaries and 3 replicas on free
//! loopback ports, formed with `redis-cli --cluster create`.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::{INSTRUCTIONS, RedisServer};

/// How long forming a cluster may take before it counts as failed.
const FORM_TIMEOUT: Duration = Duration::from_secs(30);

/// A cluster of 3 primaries, each with one replica, killed on drop.
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
}

/// Finds `redis-cli` next to `redis-server`, or on the `PATH`.
fn find_cli() -> Option<std::path::PathBuf> {
    let beside = crate::find_binary()
        .and_then(|server| server.parent().map(|dir| dir.join("redis-cli")))
        .filter(|cli| cli.is_file());
    beside.or_else(|| {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join("redis-cli"))
                .find(|p| p.is_file())
        })
    })
}

impl RedisCluster {
    /// Starts six cluster-enabled servers and forms them into 3 primaries with a replica each,
    /// waiting until every node reports `cluster_state:ok`.
    ///
    /// # Panics
    ///
    /// With the reason (and [`INSTRUCTIONS`] when no binary is found) when it cannot.
    #[allow(clippy::panic)]
    pub fn spawn() -> Self {
        match Self::try_spawn() {
            Ok(cluster) => cluster,
            Err(e) => panic!("{e}"),
        }
    }

    /// As [`spawn`](Self::spawn).
    ///
    /// # Errors
    ///
    /// A message naming what went wrong.
    pub fn try_spawn() -> Result<Self, String> {
        let cli = find_cli().ok_or_else(|| {
            format!("no redis-cli to form a cluster with (Debian: redis-tools)\n{INSTRUCTIONS}")
        })?;
        let args = [
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            "2000",
        ];
        let nodes = (0..6)
            .map(|_| RedisServer::try_spawn_with(&args))
            .collect::<Result<Vec<_>, _>>()?;
        let addresses: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port()))
            .collect();
        let output = Command::new(&cli)
            .args(["--cluster", "create"])
            .args(&addresses)
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .output()
            .map_err(|e| format!("cannot run {}: {e}", cli.display()))?;
        if !output.status.success() {
            return Err(format!(
                "redis-cli --cluster create failed: {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        let cluster = Self { nodes };
        cluster.wait_until_ok()?;
        Ok(cluster)
    }

    fn wait_until_ok(&self) -> Result<(), String> {
        let deadline = Instant::now()
            .checked_add(FORM_TIMEOUT)
            .ok_or("the cluster's forming deadline is past the clock's range")?;
        loop {
            let all_ok = self.nodes.iter().all(|node| {
                let info: redis::RedisResult<String> = redis::cmd("CLUSTER")
                    .arg("INFO")
                    .query(&mut node.connection());
                info.is_ok_and(|i| i.contains("cluster_state:ok"))
            });
            if all_ok {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "the cluster did not reach cluster_state:ok in {FORM_TIMEOUT:?}"
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Every node, primaries and replicas.
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// The seed URLs of every node, `redis://127.0.0.1:<port>`.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// The hash slot of `key` (`CLUSTER KEYSLOT`).
    #[allow(clippy::panic)]
    pub fn slot_of(&self, key: &str) -> u16 {
        redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut self.nodes[0].connection())
            .unwrap_or_else(|e| panic!("CLUSTER KEYSLOT {key}: {e}"))
    }

    /// The node that serves `key` now (the primary owning its slot).
    #[allow(clippy::panic)]
    pub fn primary_for(&self, key: &str) -> &RedisServer {
        let slot = self.slot_of(key);
        let slots: Vec<(u16, u16, (String, u16))> = self.slot_ranges();
        let port = slots
            .iter()
            .find(|(start, end, _)| (*start..=*end).contains(&slot))
            .map(|(_, _, (_, port))| *port)
            .unwrap_or_else(|| panic!("no node owns slot {slot}"));
        self.nodes
            .iter()
            .find(|n| n.port() == port)
            .unwrap_or_else(|| panic!("slot {slot} is served by an unknown port {port}"))
    }

    /// `CLUSTER SLOTS` as (first slot, last slot, (primary host, primary port)).
    #[allow(clippy::panic)]
    fn slot_ranges(&self) -> Vec<(u16, u16, (String, u16))> {
        let raw: Vec<redis::Value> = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query(&mut self.nodes[0].connection())
            .unwrap_or_else(|e| panic!("CLUSTER SLOTS: {e}"));
        raw.into_iter()
            .filter_map(|range| {
                let redis::Value::Array(items) = range else {
                    return None;
                };
                let start: u16 = redis::from_redis_value(items.first()?.clone()).ok()?;
                let end: u16 = redis::from_redis_value(items.get(1)?.clone()).ok()?;
                let redis::Value::Array(primary) = items.get(2)?.clone() else {
                    return None;
                };
                let host: String = redis::from_redis_value(primary.first()?.clone()).ok()?;
                let port: u16 = redis::from_redis_value(primary.get(1)?.clone()).ok()?;
                Some((start, end, (host, port)))
            })
            .collect()
    }

    /// The ports of the primaries.
    pub fn primary_ports(&self) -> Vec<u16> {
        let mut ports: Vec<u16> = self
            .slot_ranges()
            .into_iter()
            .map(|(_, _, (_, port))| port)
            .collect();
        ports.sort_unstable();
        ports.dedup();
        ports
    }
}
