//! Replica sync (Redisson's `checkLockSyncedSlaves`): after a script changed a synchronizer on
//! a primary, `WAIT` (or `WAITAOF`) until its replicas have the change, so that a failover
//! right after it does not undo it.
//!
//! The script and its `WAIT` go in one round trip, on one of a few connections of their own
//! (*lanes*, taken in turn): Redis holds a connection that sent `WAIT` until the replicas
//! answer, which on the client's shared connection would hold up every other call behind it
//! (renewals and reads included, for the whole timeout when a replica hangs). On a lane it
//! holds up only other synced calls.
//!
//! How many replicas a primary has is looked up, not configured: `INFO replication` on a
//! standalone or Sentinel-managed primary, `CLUSTER SHARDS` on a cluster (replicas whose health
//! is not `failed`), kept for [`TOPOLOGY_TTL`]. A primary with no replica is not waited on (as
//! Redisson does), and a sync that no replica acknowledged in time is reported to the caller,
//! which rolls back an acquire, counts a renewal as failed, or logs a release.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use redis::Value;

use crate::connection::{Connection, Opener};
use crate::script::ScriptCall;

use crate::replica_sync::{ReplicaSync, Replicas, SyncMode};

tokio::task_local! {
    /// Set while a call undoes an acquire the replicas did not acknowledge: its scripts need
    /// no `WAIT` (the replicas never had what it takes back), and one more timeout would only
    /// delay the caller's next try.
    static ROLLING_BACK: ();
}

/// Runs `undo` without replica sync for its scripts (see [`ROLLING_BACK`]).
pub(crate) async fn without_sync<F: std::future::Future>(undo: F) -> F::Output {
    ROLLING_BACK.scope((), undo).await
}

/// Whether the current task is rolling back ([`without_sync`]).
pub(crate) fn rolling_back() -> bool {
    ROLLING_BACK.try_with(|_| ()).is_ok()
}

/// How long a replica count is trusted.
const TOPOLOGY_TTL: Duration = Duration::from_secs(2);

/// What a sync found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Synced {
    /// Sync is off, or the primary has no replica to wait for.
    NotNeeded,
    /// Enough replicas acknowledged.
    Yes,
    /// Fewer replicas than required acknowledged within the timeout.
    No { acked: u32, wanted: u32 },
}

/// The sync settings of a client, with what it learnt about the servers.
pub(crate) struct Replication {
    settings: Option<ReplicaSync>,
    /// Connections for scripts with their `WAIT`, taken in turn.
    lanes: Vec<Connection>,
    next_lane: std::sync::atomic::AtomicUsize,
    /// `WAITAOF` rather than `WAIT` (decided once at connect).
    aof: bool,
    /// Replica counts: of the one primary (key `None`), or per cluster slot range.
    counts: Mutex<Option<(Instant, Counts)>>,
}

#[derive(Debug, Clone)]
enum Counts {
    One(u32),
    /// (first slot, last slot, online replicas).
    Ranges(Vec<(u16, u16, u32)>),
}

impl Replication {
    /// Sync off.
    pub(crate) fn off() -> Self {
        Self {
            settings: None,
            lanes: Vec::new(),
            next_lane: std::sync::atomic::AtomicUsize::new(0),
            aof: false,
            counts: Mutex::new(None),
        }
    }

    /// Sync as `settings` say, choosing `WAIT` or `WAITAOF` by asking the server once, with
    /// the lanes `opener` opens.
    pub(crate) async fn start(
        settings: Option<ReplicaSync>,
        conn: &Connection,
        opener: &Opener,
    ) -> redis::RedisResult<Self> {
        let Some(settings) = settings else {
            return Ok(Self::off());
        };
        let aof = match settings.mode {
            SyncMode::Wait => false,
            SyncMode::WaitAof if !has_waitaof(conn).await => {
                return Err(redis::RedisError::from((
                    redis::ErrorKind::InvalidClientConfig,
                    "replica sync with SyncMode::WaitAof needs WAITAOF (Redis 7.2+), which this server does not have: use SyncMode::Wait or Auto",
                )));
            }
            SyncMode::WaitAof => true,
            SyncMode::Auto => has_waitaof(conn).await && keeps_aof(conn).await,
        };
        let mut lanes = Vec::new();
        for _ in 0..settings.connections.max(1) {
            lanes.push(opener.open().await?.tracking_with(conn.tracking()));
        }
        tracing::debug!(aof, ?settings, "replica sync on");
        Ok(Self {
            settings: Some(settings),
            lanes,
            next_lane: std::sync::atomic::AtomicUsize::new(0),
            aof,
            counts: Mutex::new(None),
        })
    }

    /// Whether sync is on.
    pub(crate) fn enabled(&self) -> bool {
        self.settings.is_some()
    }

    /// Runs `call` and, in the same round trip on a lane, the `WAIT` for the replicas of its
    /// key's primary. The first result is the script's reply; the second, whether enough
    /// replicas acknowledged (an error when the `WAIT` itself failed).
    pub(crate) async fn eval_synced(
        &self,
        call: &ScriptCall,
    ) -> redis::RedisResult<(Value, redis::RedisResult<Synced>)> {
        let key = call.keys().next().unwrap_or_default();
        let Some(settings) = self.settings else {
            return Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "replica sync is off",
            )));
        };
        let lane = self.lane();
        let available = self.replicas_of(lane, key).await?;
        let wanted = match settings.replicas {
            Replicas::All => available,
            Replicas::AtLeast(n) => n,
        };
        if wanted == 0 || (available == 0 && settings.replicas == Replicas::All) {
            return Ok((lane.eval(call).await?, Ok(Synced::NotNeeded)));
        }
        let wait = self.wait_command(wanted, settings);
        let loads = if call.is_plain() {
            Vec::new()
        } else {
            lane.loads_before(call.script(), false).await
        };
        let by = crate::connection::send_by();
        crate::connection::in_time(by)?;
        // The loads, if any, go first in the same pipeline.
        let mut replies = lane.pipeline_call(&loads, call, &[&wait], key).await?;
        if replies.first().is_some_and(is_noscript) {
            tracing::debug!(
                script = call.script().name(),
                "the server lacks the script: sending it with EVAL"
            );
            crate::connection::in_time(by)?;
            call.set_armed(false);
            let mut pipe = redis::pipe();
            pipe.add_command(call.eval_command()).add_command(wait);
            replies = lane.pipeline_at(&pipe, 2, key).await?;
        }
        let mut replies = replies.into_iter();
        let (Some(reply), Some(waited)) = (replies.next(), replies.next()) else {
            return Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "a script and WAIT pipeline came back short",
            )));
        };
        let reply = reply.extract_error()?;
        let synced = waited
            .extract_error()
            .map(|waited| self.judge(&waited, wanted, settings));
        Ok((reply, synced))
    }

    /// The next lane in turn.
    fn lane(&self) -> &Connection {
        let n = self
            .next_lane
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // `start` opens at least one lane.
        &self.lanes[n % self.lanes.len()]
    }

    fn wait_command(&self, wanted: u32, settings: ReplicaSync) -> redis::Cmd {
        let timeout = crate::time::millis(settings.timeout).max(1);
        let mut cmd = if self.aof {
            let mut cmd = redis::cmd("WAITAOF");
            cmd.arg(0);
            cmd
        } else {
            redis::cmd("WAIT")
        };
        cmd.arg(wanted).arg(timeout);
        cmd
    }

    /// What a `WAIT` (a count) or `WAITAOF` (`[local, replicas]`) reply says.
    fn judge(&self, waited: &Value, wanted: u32, settings: ReplicaSync) -> Synced {
        let acked = match waited {
            Value::Int(n) => *n,
            Value::Array(items) => match items.get(1) {
                Some(Value::Int(n)) => *n,
                _ => 0,
            },
            _ => 0,
        };
        let acked = u32::try_from(acked).unwrap_or(0);
        let enough = match settings.replicas {
            // Redisson's rule: waiting for every replica, a sync fails when none answered.
            Replicas::All => acked >= 1,
            Replicas::AtLeast(n) => acked >= n,
        };
        if enough {
            Synced::Yes
        } else {
            // The replicas may have changed (one failed, a failover): look again next time.
            self.forget();
            Synced::No { acked, wanted }
        }
    }

    fn forget(&self) {
        *self.counts.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// How many online replicas the primary of `key` has.
    async fn replicas_of(&self, conn: &Connection, key: &str) -> redis::RedisResult<u32> {
        let cached = self
            .counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .filter(|(at, _)| at.elapsed() < TOPOLOGY_TTL)
            .map(|(_, counts)| counts.clone());
        let counts = match cached {
            Some(counts) => counts,
            None => {
                let counts = if conn.is_cluster() {
                    Counts::Ranges(cluster_replicas(conn).await?)
                } else {
                    Counts::One(connected_replicas(conn).await?)
                };
                *self.counts.lock().unwrap_or_else(|e| e.into_inner()) =
                    Some((Instant::now(), counts.clone()));
                counts
            }
        };
        Ok(match counts {
            Counts::One(n) => n,
            Counts::Ranges(ranges) => {
                let slot = crate::keys::hash_slot(key);
                ranges
                    .iter()
                    .find(|(first, last, _)| (*first..=*last).contains(&slot))
                    .map_or(0, |(_, _, n)| *n)
            }
        })
    }
}

/// `connected_slaves` of `INFO replication`.
async fn connected_replicas(conn: &Connection) -> redis::RedisResult<u32> {
    let info = conn.query(redis::cmd("INFO").arg("replication")).await?;
    let text: String = redis::from_redis_value(info)?;
    Ok(text
        .lines()
        .find_map(|l| l.strip_prefix("connected_slaves:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0))
}

/// Per slot range of `CLUSTER SHARDS`, the replicas not marked `failed`.
async fn cluster_replicas(conn: &Connection) -> redis::RedisResult<Vec<(u16, u16, u32)>> {
    let shards = conn.query(redis::cmd("CLUSTER").arg("SHARDS")).await?;
    let mut ranges = Vec::new();
    let Value::Array(shards) = shards else {
        return Ok(ranges);
    };
    for shard in &shards {
        let slots: Vec<i64> = field(shard, "slots")
            .and_then(|v| redis::from_redis_value(v.clone()).ok())
            .unwrap_or_default();
        let replicas = match field(shard, "nodes") {
            Some(Value::Array(nodes)) => nodes
                .iter()
                // Not `online` only: Redis 7.0 reports a healthy replica as `loading` while
                // its gossiped offset is 0.
                .filter(|n| {
                    text(field(n, "role")) == Some("replica")
                        && text(field(n, "health")) != Some("failed")
                })
                .count(),
            _ => 0,
        };
        for pair in slots.chunks(2) {
            if let [first, last] = pair
                && let (Ok(first), Ok(last)) = (u16::try_from(*first), u16::try_from(*last))
            {
                ranges.push((first, last, u32::try_from(replicas).unwrap_or(u32::MAX)));
            }
        }
    }
    Ok(ranges)
}

/// The value of `name` in a RESP2 list of pairs or a RESP3 map.
fn field<'a>(value: &'a Value, name: &str) -> Option<&'a Value> {
    match value {
        Value::Array(items) => items
            .chunks(2)
            .find(|pair| text(pair.first()) == Some(name))
            .and_then(|pair| pair.get(1)),
        Value::Map(pairs) => pairs
            .iter()
            .find(|(k, _)| text(Some(k)) == Some(name))
            .map(|(_, v)| v),
        _ => None,
    }
}

fn is_noscript(value: &Value) -> bool {
    matches!(value, Value::ServerError(e) if e.code() == "NOSCRIPT")
}

fn text(value: Option<&Value>) -> Option<&str> {
    match value? {
        Value::BulkString(bytes) => std::str::from_utf8(bytes).ok(),
        Value::SimpleString(s) => Some(s),
        _ => None,
    }
}

/// Whether the server knows `WAITAOF` (Redis 7.2+).
async fn has_waitaof(conn: &Connection) -> bool {
    conn.query(redis::cmd("COMMAND").arg("INFO").arg("WAITAOF"))
        .await
        .is_ok_and(
            |v| matches!(v, Value::Array(items) if items.first().is_some_and(|i| *i != Value::Nil)),
        )
}

/// Whether the server keeps an append-only file (without one, `WAITAOF` cannot be answered).
async fn keeps_aof(conn: &Connection) -> bool {
    let info = conn.query(redis::cmd("INFO").arg("persistence")).await;
    info.ok()
        .and_then(|v| redis::from_redis_value::<String>(v).ok())
        .is_some_and(|t| t.lines().any(|l| l.trim() == "aof_enabled:1"))
}

impl std::fmt::Debug for Replication {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replication")
            .field("settings", &self.settings)
            .field("aof", &self.aof)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn cluster_shards_fields_are_read_from_pairs_and_maps() {
        let node = Value::Array(vec![
            bulk("role"),
            bulk("replica"),
            bulk("health"),
            bulk("online"),
        ]);
        assert_eq!(text(field(&node, "role")), Some("replica"));
        assert_eq!(text(field(&node, "health")), Some("online"));
        assert_eq!(field(&node, "port"), None);
        let map = Value::Map(vec![(bulk("role"), bulk("master"))]);
        assert_eq!(text(field(&map, "role")), Some("master"));
    }
}
