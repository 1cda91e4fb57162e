//! Whether a deployment keeps the guarantees of docs/guarantees.md
//! ([`Client::check_deployment`](crate::Client::check_deployment), `ferrisson doctor`): what
//! each server shows of its eviction, persistence, replication, cluster coverage, version, the
//! client's permissions, round trips and clock, read and never written. This module holds the
//! report and the rules; the client reads the servers (`client/deployment.rs`).

use std::collections::BTreeMap;
use std::fmt;

use redis::Value;

mod rules;
pub(crate) use rules::{cluster, eviction, persistence, replication, script_time_limit, server};

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

/// One finding of [`Client::check_deployment`](crate::Client::check_deployment).
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

/// What [`Client::check_deployment`](crate::Client::check_deployment) found.
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

    pub(crate) fn push(
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

/// A server's `INFO`, as `field → value`.
pub(crate) type Info = BTreeMap<String, String>;

pub(crate) fn parse_info(text: &str) -> Info {
    text.lines()
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect()
}

pub(crate) fn text_of(value: Value) -> Option<String> {
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
