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
    /// The primaries as formed, to tell a promoted replica.
    original_primaries: Vec<u16>,
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
            "1000",
            // A replica takes over however long it was cut off from its primary: failover tests
            // freeze a replica to make it miss writes, then kill its primary.
            "--cluster-replica-validity-factor",
            "0",
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
        let mut cluster = Self {
            nodes,
            original_primaries: Vec::new(),
        };
        cluster.wait_until_ok()?;
        cluster.original_primaries = cluster.primary_ports();
        cluster.wait_for_replicas()?;
        Ok(cluster)
    }

    /// Waits until every primary has its replica online (`INFO replication`), so that a
    /// `WAIT` for one replica is answered.
    fn wait_for_replicas(&self) -> Result<(), String> {
        let deadline = deadline_in(FORM_TIMEOUT);
        loop {
            let synced = self.original_primaries.iter().all(|port| {
                let info: redis::RedisResult<String> = redis::cmd("INFO")
                    .arg("replication")
                    .query(&mut self.node(*port).connection());
                info.is_ok_and(|i| i.contains("connected_slaves:1") && i.contains("state=online"))
            });
            if synced {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("the replicas did not sync within {FORM_TIMEOUT:?}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
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
            .query(&mut self.witness(0).connection())
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

    /// `CLUSTER SLOTS` as seen by a running node.
    fn slot_ranges(&self) -> Vec<(u16, u16, (String, u16))> {
        self.nodes
            .iter()
            .filter(|n| n.is_running())
            .map(slot_ranges_of)
            .find(|r| !r.is_empty())
            .unwrap_or_default()
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

    /// The node listening on `port`.
    #[allow(clippy::panic)]
    pub fn node(&self, port: u16) -> &RedisServer {
        self.nodes
            .iter()
            .find(|n| n.port() == port)
            .unwrap_or_else(|| panic!("no node on port {port}"))
    }

    /// The node listening on `port`, to stop, freeze or restart.
    #[allow(clippy::panic)]
    pub fn node_mut(&mut self, port: u16) -> &mut RedisServer {
        self.nodes
            .iter_mut()
            .find(|n| n.port() == port)
            .unwrap_or_else(|| panic!("no node on port {port}"))
    }

    /// The port of the replica of the primary on `primary` (`INFO replication`).
    #[allow(clippy::panic)]
    pub fn replica_of(&self, primary: u16) -> u16 {
        let deadline = deadline_in(FORM_TIMEOUT);
        loop {
            let info: String = redis::cmd("INFO")
                .arg("replication")
                .query(&mut self.node(primary).connection())
                .unwrap_or_else(|e| panic!("INFO replication on {primary}: {e}"));
            let port = info
                .lines()
                .find(|l| l.starts_with("slave0:"))
                .and_then(|l| l.split(',').find_map(|kv| kv.strip_prefix("port=")))
                .and_then(|p| p.trim().parse().ok());
            if let Some(port) = port {
                return port;
            }
            assert!(
                Instant::now() < deadline,
                "the primary on {primary} has no replica"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A running node other than `except`, to ask about the cluster.
    #[allow(clippy::panic)]
    fn witness(&self, except: u16) -> &RedisServer {
        self.nodes
            .iter()
            .find(|n| n.port() != except && n.is_running())
            .unwrap_or_else(|| panic!("no running node besides {except}"))
    }

    /// Waits until the cluster has promoted another node in place of the primary on `old`
    /// (which the test killed or froze) and serves every slot again; returns the new primary
    /// of the slots `old` served.
    #[allow(clippy::panic)]
    pub fn wait_for_failover(&self, old: u16) -> u16 {
        let deadline = deadline_in(FORM_TIMEOUT);
        loop {
            let witness = self.witness(old);
            let ranges = slot_ranges_of(witness);
            let covered: u32 = ranges
                .iter()
                .map(|(start, end, _)| u32::from(*end) - u32::from(*start) + 1)
                .sum();
            if covered == 16_384 && ranges.iter().all(|(_, _, (_, port))| *port != old) {
                let primaries: std::collections::BTreeSet<u16> =
                    ranges.iter().map(|(_, _, (_, port))| *port).collect();
                let ok = primaries.iter().all(|port| {
                    let info: redis::RedisResult<String> = redis::cmd("CLUSTER")
                        .arg("INFO")
                        .query(&mut self.node(*port).connection());
                    info.is_ok_and(|i| i.contains("cluster_state:ok"))
                });
                let promoted = primaries
                    .iter()
                    .copied()
                    .find(|p| !self.primary_ports_before_contains(*p));
                if ok && let Some(port) = promoted {
                    return port;
                }
            }
            assert!(
                Instant::now() < deadline,
                "no failover of the primary on {old} within {FORM_TIMEOUT:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn primary_ports_before_contains(&self, port: u16) -> bool {
        self.original_primaries.contains(&port)
    }

    /// Moves the slot of `key`, with its keys, to the primary on `to` (`CLUSTER SETSLOT`
    /// IMPORTING/MIGRATING, `MIGRATE`, then `SETSLOT … NODE` on every primary), as
    /// `redis-cli --cluster reshard` does.
    #[allow(clippy::panic)]
    pub fn move_slot_of(&self, key: &str, to: u16) {
        let slot = self.slot_of(key);
        let from = self.primary_for(key).port();
        assert_ne!(from, to, "the slot of {key} is already on {to}");
        let id = |port: u16| -> String {
            redis::cmd("CLUSTER")
                .arg("MYID")
                .query(&mut self.node(port).connection())
                .unwrap_or_else(|e| panic!("CLUSTER MYID on {port}: {e}"))
        };
        let (from_id, to_id) = (id(from), id(to));
        let setslot = |port: u16, args: &[&str]| {
            let mut cmd = redis::cmd("CLUSTER");
            cmd.arg("SETSLOT").arg(slot).arg(args);
            let done: redis::RedisResult<()> = cmd.query(&mut self.node(port).connection());
            done.unwrap_or_else(|e| panic!("CLUSTER SETSLOT {slot} {args:?} on {port}: {e}"));
        };
        setslot(to, &["IMPORTING", &from_id]);
        setslot(from, &["MIGRATING", &to_id]);
        let mut source = self.node(from).connection();
        loop {
            let keys: Vec<String> = redis::cmd("CLUSTER")
                .arg("GETKEYSINSLOT")
                .arg(slot)
                .arg(100)
                .query(&mut source)
                .unwrap_or_else(|e| panic!("CLUSTER GETKEYSINSLOT {slot}: {e}"));
            if keys.is_empty() {
                break;
            }
            let moved: redis::RedisResult<()> = redis::cmd("MIGRATE")
                .arg("127.0.0.1")
                .arg(to)
                .arg("")
                .arg(0)
                .arg(5_000)
                .arg("KEYS")
                .arg(&keys)
                .query(&mut source);
            moved.unwrap_or_else(|e| panic!("MIGRATE of slot {slot}: {e}"));
        }
        setslot(to, &["NODE", &to_id]);
        setslot(from, &["NODE", &to_id]);
        for port in self.primary_ports() {
            if port != from && port != to {
                setslot(port, &["NODE", &to_id]);
            }
        }
        let deadline = deadline_in(FORM_TIMEOUT);
        while self.primary_for(key).port() != to {
            assert!(
                Instant::now() < deadline,
                "slot {slot} did not move to {to}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn deadline_in(d: Duration) -> Instant {
    Instant::now().checked_add(d).unwrap_or_else(Instant::now)
}

/// `CLUSTER SLOTS` of `node` as (first slot, last slot, (primary host, primary port)).
#[allow(clippy::panic)]
fn slot_ranges_of(node: &RedisServer) -> Vec<(u16, u16, (String, u16))> {
    let raw: redis::RedisResult<Vec<redis::Value>> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query(&mut node.connection());
    let Ok(raw) = raw else {
        return Vec::new();
    };
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
