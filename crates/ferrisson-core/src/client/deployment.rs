//! [`Client::check_deployment`] and the warning at connect: the servers read for the report of
//! [`crate::doctor`], whose rules give the verdicts.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::Value;

use super::Client;
use crate::connection::Node;
use crate::doctor::{
    Area, DeploymentReport, Verdict, cluster, eviction, parse_info, persistence, replication,
    script_time_limit, server, text_of,
};
use crate::error::Result;

/// How many `PING`s the latency check sends.
const PINGS: usize = 20;

impl Client {
    /// Whether this deployment keeps the guarantees of docs/guarantees.md, per guarantee and
    /// server (every primary of a cluster), with why not and the fix: eviction, persistence,
    /// replication and failover, cluster coverage, the server's version and Lua, this
    /// client's rights (`ACL DRYRUN`), round trips against the lease, and the server's clock.
    /// `ferrisson doctor` prints the same report.
    ///
    /// It reads (`INFO`, `CONFIG GET`, `CLUSTER INFO`, `ACL WHOAMI`, `ACL DRYRUN`, `TIME`,
    /// `PING`, and `EVAL` of a script that returns 1, to see Lua run) and never writes; what
    /// the user may not read is [`Verdict::Unchecked`].
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
            let limit = match config("busy-reply-threshold").await {
                Some(limit) => Some(limit),
                None => config("lua-time-limit").await,
            };
            script_time_limit(&mut report, label, limit.and_then(|l| l.parse().ok()));
        }
        if conn.is_cluster() {
            let info = conn
                .query(&redis::cmd("CLUSTER").arg("INFO").clone())
                .await
                .ok()
                .and_then(text_of)
                .map(|t| parse_info(&t));
            cluster(&mut report, info.as_ref(), self.config().namespace());
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
        // A tenth of the period or more (a round trip too long to multiply counts as more).
        let (verdict, fix) = if max.checked_mul(10).is_none_or(|ten| ten > period) {
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

/// At connect, unless turned off ([`ClientConfig::with_deployment_warning`]): the server's
/// `INFO` read in the background (one command, on the client's own server; on a cluster, the
/// node it routes to), and one warning naming each guarantee it shows broken. No other
/// command: the full report is [`Client::check_deployment`].
///
/// [`ClientConfig::with_deployment_warning`]: crate::ClientConfig::with_deployment_warning
pub(crate) fn warn_at_connect(client: &Client) {
    if !client.config().deployment_warning() {
        return;
    }
    // What the check needs, not the client: a client dropped meanwhile goes at once.
    let conn = client.inner.conn.clone();
    let closing = client.inner.closing.clone();
    let replica_sync = client.config().replica_sync().is_some();
    let address = client.address().to_owned();
    tokio::spawn(async move {
        let cmd = redis::cmd("INFO");
        let info = tokio::select! {
            () = closing.cancelled() => return,
            info = conn.query(&cmd) => info,
        };
        let info = match info {
            Ok(info) => parse_info(&text_of(info).unwrap_or_default()),
            Err(e) => {
                tracing::debug!(target: "ferrisson_core::doctor", error = %e, "the deployment check at connect could not read INFO");
                return;
            }
        };
        let mut report = DeploymentReport::default();
        eviction(&mut report, None, &info);
        persistence(&mut report, None, &info, None, None);
        replication(&mut report, None, &info, None, replica_sync);
        let broken: Vec<String> = report
            .findings
            .iter()
            .filter(|f| f.verdict == Verdict::Broken)
            .map(|f| format!("{} ({})", f.area, f.detail))
            .collect();
        tracing::debug!(target: "ferrisson_core::doctor", broken = broken.len(), "the deployment checked at connect");
        if !broken.is_empty() {
            tracing::warn!(
                target: "ferrisson_core::doctor",
                %address,
                "this Redis breaks guarantees the synchronizers rely on: {}. `ferrisson doctor` (or Client::check_deployment) gives the fixes; ClientConfig::with_deployment_warning(false) silences this",
                broken.join("; ")
            );
        }
    });
}
