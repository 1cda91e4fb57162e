//! A local Redis Sentinel set-up of `redis-server` processes: one primary, one replica and
//! three sentinels watching them, on free loopback ports.

use std::time::{Duration, Instant};

use crate::RedisServer;

/// The name the sentinels know the primary by.
pub const PRIMARY_NAME: &str = "ferrisson";

/// How long forming the set-up, or a failover, may take before it counts as failed.
const TIMEOUT: Duration = Duration::from_secs(30);

/// One primary, one replica, three sentinels (quorum 2, a primary is down after 1 s of
/// silence), killed on drop.
#[derive(Debug)]
pub struct RedisSentinel {
    /// The primary, then the replica (their roles change with failovers).
    data: Vec<RedisServer>,
    sentinels: Vec<RedisServer>,
}

impl RedisSentinel {
    /// Starts the set-up and waits until every sentinel knows the replica and the other
    /// sentinels (so that a failover can happen).
    ///
    /// # Panics
    ///
    /// With the reason when it cannot.
    #[allow(clippy::panic)]
    pub fn spawn() -> Self {
        match Self::try_spawn() {
            Ok(setup) => setup,
            Err(e) => panic!("{e}"),
        }
    }

    /// As [`spawn`](Self::spawn).
    ///
    /// # Errors
    ///
    /// A message naming what went wrong.
    pub fn try_spawn() -> Result<Self, String> {
        let primary = RedisServer::try_spawn()?;
        let replica = RedisServer::try_spawn_with(&[
            "--replicaof",
            "127.0.0.1",
            &primary.port().to_string(),
        ])?;
        let conf = format!(
            "sentinel monitor {PRIMARY_NAME} 127.0.0.1 {} 2\n\
             sentinel down-after-milliseconds {PRIMARY_NAME} 1000\n\
             sentinel failover-timeout {PRIMARY_NAME} 5000\n\
             sentinel parallel-syncs {PRIMARY_NAME} 1",
            primary.port()
        );
        let sentinels = (0..3)
            .map(|_| RedisServer::try_spawn_sentinel(&conf))
            .collect::<Result<Vec<_>, _>>()?;
        let setup = Self {
            data: vec![primary, replica],
            sentinels,
        };
        setup.wait_until_formed()?;
        Ok(setup)
    }

    fn wait_until_formed(&self) -> Result<(), String> {
        let deadline = deadline_in(TIMEOUT);
        loop {
            let formed = self.sentinels.iter().all(|s| {
                let mut con = s.connection();
                let replicas: redis::RedisResult<Vec<redis::Value>> = redis::cmd("SENTINEL")
                    .arg("REPLICAS")
                    .arg(PRIMARY_NAME)
                    .query(&mut con);
                let peers: redis::RedisResult<Vec<redis::Value>> = redis::cmd("SENTINEL")
                    .arg("SENTINELS")
                    .arg(PRIMARY_NAME)
                    .query(&mut con);
                replicas.is_ok_and(|r| !r.is_empty()) && peers.is_ok_and(|p| p.len() == 2)
            });
            if formed {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "the sentinels did not learn the replica and each other within {TIMEOUT:?}"
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `redis://127.0.0.1:<port>` of each sentinel.
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels.iter().map(RedisServer::url).collect()
    }

    /// `redis-sentinel://127.0.0.1:<port>,…/ferrisson`: the URL a client connects with.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .sentinels
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port()))
            .collect();
        format!("redis-sentinel://{}/{PRIMARY_NAME}", hosts.join(","))
    }

    /// The name the sentinels know the primary by.
    pub fn primary_name(&self) -> &str {
        PRIMARY_NAME
    }

    /// The port of the primary, as the first sentinel that answers says.
    #[allow(clippy::panic)]
    pub fn primary_port(&self) -> u16 {
        self.sentinels
            .iter()
            .filter(|s| s.is_running())
            .find_map(|s| {
                let addr: redis::RedisResult<(String, u16)> = redis::cmd("SENTINEL")
                    .arg("GET-MASTER-ADDR-BY-NAME")
                    .arg(PRIMARY_NAME)
                    .query(&mut s.connection());
                addr.ok().map(|(_, port)| port)
            })
            .unwrap_or_else(|| panic!("no sentinel names a primary"))
    }

    /// The data node (primary or replica) on `port`.
    #[allow(clippy::panic)]
    pub fn node(&self, port: u16) -> &RedisServer {
        self.data
            .iter()
            .find(|n| n.port() == port)
            .unwrap_or_else(|| panic!("no data node on port {port}"))
    }

    /// The data node on `port`, to stop, freeze or restart.
    #[allow(clippy::panic)]
    pub fn node_mut(&mut self, port: u16) -> &mut RedisServer {
        self.data
            .iter_mut()
            .find(|n| n.port() == port)
            .unwrap_or_else(|| panic!("no data node on port {port}"))
    }

    /// The port of the data node that is not on `port`.
    #[allow(clippy::panic)]
    pub fn other(&self, port: u16) -> u16 {
        self.data
            .iter()
            .map(RedisServer::port)
            .find(|p| *p != port)
            .unwrap_or_else(|| panic!("no data node besides {port}"))
    }

    /// Waits until the sentinels have promoted another node in place of the primary on `old`
    /// (which the test killed or froze) and the new one answers as a primary; returns its port.
    #[allow(clippy::panic)]
    pub fn wait_for_failover(&self, old: u16) -> u16 {
        let deadline = deadline_in(TIMEOUT);
        loop {
            let port = self.primary_port();
            if port != old {
                let role: redis::RedisResult<Vec<redis::Value>> =
                    redis::cmd("ROLE").query(&mut self.node(port).connection());
                let is_primary = role.is_ok_and(
                    |r| matches!(r.first(), Some(redis::Value::BulkString(b)) if b == b"master"),
                );
                if is_primary {
                    return port;
                }
            }
            assert!(
                Instant::now() < deadline,
                "no failover of the primary on {old} within {TIMEOUT:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn deadline_in(d: Duration) -> Instant {
    Instant::now().checked_add(d).unwrap_or_else(Instant::now)
}
