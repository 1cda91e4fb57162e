//! Whether a deployment keeps the guarantees of docs/guarantees.md ([`Client::check_deployment`],
//! `ferrisson doctor`): what each server shows of its eviction, persistence, replication,
//! cluster coverage, version, the client's permissions, round trips and clock, read and never
//! written.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::Value;

use crate::client::Client;
use crate::connection::Node;
use crate::error::Result;

mod rules;
use rules::{cluster, eviction, persistence, replication, server};

/// What a check found, from fine to worst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verdict {
    /// The deployment keeps the guarantee.
    Kept,
    /// It keeps it with a window the finding names (a second of writes, a lagging replica).
    Weakened,
    /// The check could not be made (a command refused, an older server): nothing is known.
    Unchecked,
    /// The deployment breaks the guarantee.
    Broken,
}

impl Verdict {
    /// The word a report shows.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Kept => "ok",
            Self::Weakened => "weakened",
            Self::Unchecked => "unchecked",
            Self::Broken => "BROKEN",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Area {
    /// `maxmemory-policy`: whether lock and permit keys can be evicted.
    Eviction,
    /// What a restart keeps: none, RDB, AOF and its `appendfsync`.
    Persistence,
    /// Replicas, `min-replicas-to-write`, replica sync: what a failover can lose.
    Replication,
    /// Every slot of a cluster served.
    Cluster,
    /// The server's version and what it enables; Lua.
    Server,
    /// The client's rights for the commands, keys and channels the library uses.
    Permissions,
    /// Round trips against the lease and the watchdog's period.
    Latency,
    /// The server's clock against this host's.
    Clock,
}

impl Area {
    /// The name a report shows.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Eviction => "eviction",
            Self::Persistence => "persistence",
            Self::Replication => "replication",
            Self::Cluster => "cluster",
            Self::Server => "server",
            Self::Permissions => "permissions",
            Self::Latency => "latency",
            Self::Clock => "clock",
        }
    }

    /// The section of docs/guarantees.md the check stands for.
    pub fn guarantee(self) -> &'static str {
        match self {
            Self::Eviction | Self::Persistence => {
                "§3 Redis restarts without persistence, §9 and §10 after data loss"
            }
            Self::Replication => "§2 Failover loses an unreplicated lock",
            Self::Cluster => "§4 Redis unreachable",
            Self::Server => "§13 The lean Mutex",
            Self::Permissions => "§11 Permissions (ACL)",
            Self::Latency => "§1 The holder pauses longer than its lease",
            Self::Clock => "§8 Clocks",
        }
    }
}

impl fmt::Display for Area {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One finding of [`Client::check_deployment`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// What was checked.
    pub area: Area,
    /// The server it is about (`host:port`), where the check is one per server.
    pub node: Option<String>,
    /// Whether the deployment keeps the guarantee.
    pub verdict: Verdict,
    /// What was found, in a sentence.
    pub detail: String,
    /// What to do about it, when the verdict is not [`Verdict::Kept`].
    pub fix: Option<String>,
}

/// What [`Client::check_deployment`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeploymentReport {
    /// Every finding, in the order checked: per server, then for the whole deployment.
    pub findings: Vec<Finding>,
}

impl DeploymentReport {
    /// The worst verdict ([`Verdict::Kept`] for a report without findings).
    pub fn worst(&self) -> Verdict {
        self.findings
            .iter()
            .map(|f| f.verdict)
            .max()
            .unwrap_or(Verdict::Kept)
    }

    /// `ferrisson doctor`'s exit code: 1 when a guarantee is broken, else 2 when something
    /// could not be checked, else 0.
    pub fn exit_code(&self) -> u8 {
        match self.worst() {
            Verdict::Broken => 1,
            Verdict::Unchecked => 2,
            Verdict::Kept | Verdict::Weakened => 0,
        }
    }

    /// The findings of `area`.
    pub fn of(&self, area: Area) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(move |f| f.area == area)
    }

    fn push(
        &mut self,
        area: Area,
        node: Option<&str>,
        verdict: Verdict,
        detail: impl Into<String>,
        fix: Option<&str>,
    ) {
        self.findings.push(Finding {
            area,
            node: node.map(str::to_owned),
            verdict,
            detail: detail.into(),
            fix: fix.map(str::to_owned),
        });
    }
}

/// How many `PING`s the latency check sends.
const PINGS: usize = 20;

/// A server's `INFO`, as `field → value`.
type Info = BTreeMap<String, String>;

fn parse_info(text: &str) -> Info {
    text.lines()
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect()
}

fn text_of(value: Value) -> Option<String> {
    match value {
        Value::BulkString(b) => String::from_utf8(b).ok(),
        Value::SimpleString(s) | Value::VerbatimString { text: s, .. } => Some(s),
        _ => None,
    }
}

/// A server's version as `(major, minor)`.
fn version(info: &Info) -> Option<(u32, u32)> {
    let v = info.get("redis_version")?;
    let mut parts = v.split('.').map(|p| p.parse::<u32>().ok());
    Some((parts.next()??, parts.next()??))
}

impl Client {
    /// Whether this deployment keeps the guarantees of docs/guarantees.md, per guarantee and
    /// server (every primary of a cluster), with why not and the fix: eviction, persistence,
    /// replication and failover, cluster coverage, the server's version and Lua, this
    /// client's rights (`ACL DRYRUN`), round trips against the lease, and the server's clock.
    /// `ferrisson doctor` prints the same report.
    ///
    /// It reads (`INFO`, `CONFIG GET`, `ROLE`, `CLUSTER INFO`, `ACL DRYRUN`, `TIME`, `PING`)
    /// and never writes; what the user may not read is [`Verdict::Unchecked`].
    ///
    /// # Errors
    ///
    /// [`Error::Redis`](crate::Error::Redis) when no server can be reached at all (a server
    /// that answers some checks and refuses others gives findings, not an error).
    pub async fn check_deployment(&self) -> Result<DeploymentReport> {
        self.check_deployment_inner(None).await
    }

    /// [`check_deployment`](Self::check_deployment), with the rights checked of the ACL user
    /// `user` instead of this client's own: an operator's account checking the account a
    /// service runs as (`ferrisson doctor --user NAME`), with this client's namespace and
    /// settings standing for the service's.
    ///
    /// # Errors
    ///
    /// As [`check_deployment`](Self::check_deployment).
    pub async fn check_deployment_for(&self, user: &str) -> Result<DeploymentReport> {
        self.check_deployment_inner(Some(user)).await
    }

    async fn check_deployment_inner(&self, user: Option<&str>) -> Result<DeploymentReport> {
        let conn = &self.inner.conn;
        let nodes = conn.scan_nodes().await?;
        let mut report = DeploymentReport::default();
        for node in &nodes {
            let label = match node {
                Node::Default => None,
                Node::At { host, port } => Some(format!("{host}:{port}")),
            };
            let label = label.as_deref();
            let info = match conn.query_node(&redis::cmd("INFO"), node).await {
                Ok(info) => parse_info(&text_of(info).unwrap_or_default()),
                // Unreachable: nothing can be checked.
                Err(e) if e.is_io_error() || e.is_timeout() || e.is_connection_refusal() => {
                    return Err(e.into());
                }
                Err(e) => {
                    for area in [
                        Area::Eviction,
                        Area::Persistence,
                        Area::Replication,
                        Area::Server,
                    ] {
                        report.push(
                            area,
                            label,
                            Verdict::Unchecked,
                            format!("`INFO` was refused ({e})"),
                            Some("run the check as a user allowed `INFO` and `CONFIG GET` (an operator's account: `ferrisson doctor --user <service account>`)"),
                        );
                    }
                    continue;
                }
            };
            let config = |name: &'static str| async move {
                let got = conn
                    .query_node(&redis::cmd("CONFIG").arg("GET").arg(name).clone(), node)
                    .await
                    .ok()?;
                let pairs: Vec<String> = redis::from_redis_value(got).ok()?;
                pairs.get(1).cloned()
            };
            eviction(&mut report, label, &info);
            let fsync = config("appendfsync").await;
            let save = config("save").await;
            persistence(&mut report, label, &info, fsync.as_deref(), save.as_deref());
            let min_replicas = config("min-replicas-to-write").await;
            replication(
                &mut report,
                label,
                &info,
                min_replicas.as_deref(),
                self.config().replica_sync().is_some(),
            );
            let lua = conn
                .query_node(&redis::cmd("EVAL").arg("return 1").arg(0).clone(), node)
                .await;
            server(&mut report, label, &info, lua.err().map(|e| e.to_string()));
        }
        if conn.is_cluster() {
            let info = conn
                .query(&redis::cmd("CLUSTER").arg("INFO").clone())
                .await
                .ok()
                .and_then(text_of)
                .map(|t| parse_info(&t));
            cluster(&mut report, info.as_ref());
        }
        self.permissions(&mut report, user).await;
        self.latency_and_clock(&mut report).await;
        Ok(report)
    }

    /// `ACL DRYRUN` of what the library sends, as `user` (else this client's user).
    async fn permissions(&self, report: &mut DeploymentReport, user: Option<&str>) {
        let conn = &self.inner.conn;
        let whoami = match user {
            Some(user) => Ok(Value::BulkString(user.as_bytes().to_vec())),
            None => conn.query(&redis::cmd("ACL").arg("WHOAMI").clone()).await,
        };
        let user = match whoami {
            Ok(v) => text_of(v).unwrap_or_else(|| "default".to_owned()),
            Err(e) => {
                report.push(
                    Area::Permissions,
                    None,
                    Verdict::Unchecked,
                    format!("`ACL WHOAMI` was refused ({e}); the rights were not checked"),
                    Some("run the check as a user allowed `ACL WHOAMI` and `ACL DRYRUN`, or compare the user's rules with docs/deployment.md#permissions"),
                );
                return;
            }
        };
        let ns = self.config().namespace();
        let key = format!("{ns}ferrisson:doctor");
        let channel = format!("redisson_lock__channel:{{{key}}}");
        let publish = self.config().publish_command().as_str().to_owned();
        // What docs/deployment.md's least-privilege user may run, and the library sends.
        let mut needed: Vec<Vec<String>> = vec![
            vec!["PING".into()],
            vec!["CLIENT".into(), "SETNAME".into(), "ferrisson".into()],
            vec!["EVALSHA".into(), "0".repeat(40), "1".into(), key.clone()],
            vec!["EVAL".into(), "return 1".into(), "1".into(), key.clone()],
            vec!["SCRIPT".into(), "LOAD".into(), "return 1".into()],
            vec![publish, channel.clone(), "0".into()],
            vec!["GET".into(), key.clone()],
            vec!["EXISTS".into(), key.clone()],
            vec!["PTTL".into(), key.clone()],
            vec!["HGET".into(), key.clone(), "f".into()],
            vec!["TIME".into()],
        ];
        let subscribe = if conn.is_cluster() && publish_is_sharded(self) {
            "SSUBSCRIBE"
        } else {
            "SUBSCRIBE"
        };
        needed.push(vec![subscribe.into(), channel.clone()]);
        if self.config().replica_sync().is_some() {
            needed.push(vec!["WAIT".into(), "1".into(), "0".into()]);
            needed.push(vec!["INFO".into(), "replication".into()]);
        }
        if conn.is_cluster() {
            needed.push(vec!["CLUSTER".into(), "SHARDS".into()]);
        }
        let mut missing = Vec::new();
        for command in &needed {
            let mut cmd = redis::cmd("ACL");
            cmd.arg("DRYRUN").arg(&user);
            for word in command {
                cmd.arg(word);
            }
            match conn.query(&cmd).await {
                Ok(Value::Okay) => {}
                Ok(v) if text_of(v.clone()).as_deref() == Some("OK") => {}
                Ok(v) => missing.push(format!(
                    "{}: {}",
                    command[0],
                    text_of(v).unwrap_or_else(|| "refused".to_owned())
                )),
                Err(e) => {
                    report.push(
                        Area::Permissions,
                        None,
                        Verdict::Unchecked,
                        format!("`ACL DRYRUN` was refused or is unknown ({e}); the rights of `{user}` were not checked"),
                        Some("run the check as a user allowed `ACL DRYRUN` (Redis 7.0 or later), or compare the user's rules with docs/deployment.md#permissions"),
                    );
                    return;
                }
            }
        }
        if missing.is_empty() {
            report.push(
                Area::Permissions,
                None,
                Verdict::Kept,
                format!(
                    "`{user}` may run every command the library sends, on the synchronizers' keys and channels"
                ),
                None,
            );
        } else {
            report.push(
                Area::Permissions,
                None,
                Verdict::Broken,
                format!("`{user}` may not: {}", missing.join("; ")),
                Some("grant the rights of docs/deployment.md#permissions (`ACL SETUSER`)"),
            );
        }
    }

    /// Round trips against the lease and the watchdog's period, and the server's clock.
    async fn latency_and_clock(&self, report: &mut DeploymentReport) {
        let conn = &self.inner.conn;
        let mut rtts = Vec::with_capacity(PINGS);
        let mut skew = None;
        for i in 0..PINGS {
            let sent = Instant::now();
            let sent_wall = SystemTime::now();
            let cmd = if i == 0 {
                redis::cmd("TIME")
            } else {
                redis::cmd("PING")
            };
            let Ok(reply) = conn.query(&cmd).await else {
                continue;
            };
            let rtt = sent.elapsed();
            rtts.push(rtt);
            if i == 0 {
                skew = server_skew(reply, sent_wall, rtt);
            }
        }
        if rtts.is_empty() {
            report.push(
                Area::Latency,
                None,
                Verdict::Unchecked,
                "no `PING` was answered",
                None,
            );
            return;
        }
        rtts.sort();
        let p50 = rtts[rtts.len() / 2];
        let max = rtts[rtts.len() - 1];
        let period = self.config().watchdog_period();
        let lease = self.config().lease();
        let detail = format!(
            "round trips p50 {:.2} ms, max {:.2} ms over {} calls; lease {} ms, renewed every {} ms",
            p50.as_secs_f64() * 1e3,
            max.as_secs_f64() * 1e3,
            rtts.len(),
            lease.as_millis(),
            period.as_millis()
        );
        let (verdict, fix) = if max * 10 > period {
            (
                Verdict::Weakened,
                Some(
                    "a renewal that takes a tenth of the watchdog's period leaves little margin: raise the lease (`ClientConfig::with_lease`) or bring the client nearer the server",
                ),
            )
        } else {
            (Verdict::Kept, None)
        };
        report.push(Area::Latency, None, verdict, detail, fix);
        match skew {
            Some(skew) => {
                let ms = skew * 1e3;
                let (verdict, fix) = if skew.abs() > 1.0 {
                    (
                        Verdict::Weakened,
                        Some(
                            "synchronise the clocks (NTP): Redisson clients sharing these locks pass their own clock to Redis (fair-lock queue timeouts, expirable permits)",
                        ),
                    )
                } else {
                    (Verdict::Kept, None)
                };
                report.push(
                    Area::Clock,
                    None,
                    verdict,
                    format!("the server's clock is {ms:+.1} ms from this host's (ferrisson reads the server's; leases never depend on this host's)"),
                    fix,
                );
            }
            None => report.push(
                Area::Clock,
                None,
                Verdict::Unchecked,
                "`TIME` was not answered",
                None,
            ),
        }
    }
}

/// Whether the client publishes with `SPUBLISH` (and so subscribes with `SSUBSCRIBE`).
fn publish_is_sharded(client: &Client) -> bool {
    client
        .config()
        .publish_command()
        .as_str()
        .eq_ignore_ascii_case("spublish")
}

/// The server's clock minus this host's, in seconds (either sign), from a `TIME` reply sent at
/// `sent` that took `rtt` (the server read its clock half-way, as far as this host can tell).
fn server_skew(reply: Value, sent: SystemTime, rtt: Duration) -> Option<f64> {
    let parts: Vec<String> = redis::from_redis_value(reply).ok()?;
    let secs: f64 = parts.first()?.parse().ok()?;
    let micros: f64 = parts.get(1)?.parse().ok()?;
    let server = secs + micros / 1e6;
    let local = sent.checked_add(rtt / 2)?.duration_since(UNIX_EPOCH).ok()?;
    Some(server - local.as_secs_f64())
}
