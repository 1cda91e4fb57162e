//! The settings of replica sync (`crate::replication` does the waiting).

use std::time::Duration;

/// Replica sync (Redisson's `checkLockSyncedSlaves`): after each acquire, renewal and release
/// script on a primary with replicas, wait until they have the change, so that a failover
/// right after does not lose it (see [docs/guarantees.md](https://github.com/ferrisson/ferrisson/blob/main/docs/guarantees.md) for what this buys and what not).
///
/// On by default for Cluster and Sentinel clients (Redisson's default: every replica, 1 s),
/// off for a standalone server unless set ([`ClientConfig::with_replica_sync`](crate::ClientConfig::with_replica_sync)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaSync {
    pub(crate) replicas: Replicas,
    pub(crate) timeout: Duration,
    pub(crate) mode: SyncMode,
    pub(crate) retry_acquire: bool,
    pub(crate) connections: usize,
}

impl Default for ReplicaSync {
    fn default() -> Self {
        Self {
            replicas: Replicas::All,
            timeout: Duration::from_secs(1),
            mode: SyncMode::Auto,
            retry_acquire: true,
            connections: 4,
        }
    }
}

impl ReplicaSync {
    /// Which replicas to wait for ([`Replicas::All`] by default).
    pub fn with_replicas(mut self, replicas: Replicas) -> Self {
        self.replicas = replicas;
        self
    }

    /// How long to wait for them (Redisson's `slavesSyncTimeout`, 1 s by default).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// `WAIT` or `WAITAOF` ([`SyncMode::Auto`] by default).
    pub fn with_mode(mut self, mode: SyncMode) -> Self {
        self.mode = mode;
        self
    }

    /// Whether an acquire the replicas did not acknowledge is rolled back and tried again
    /// (per the client's retry policy, as Redisson does; the default), or rolled back and
    /// returned at once as [`Error::NotReplicated`](crate::Error::NotReplicated).
    pub fn with_retry_acquire(mut self, retry: bool) -> Self {
        self.retry_acquire = retry;
        self
    }

    /// How many connections of their own synced calls use, in turn (4 by default; at least
    /// 1). Redis holds a connection that sent `WAIT` until the replicas answer: the calls
    /// behind it on the same connection wait too, so more connections let more synced calls
    /// be answered at once (and fewer wait out a hanging replica's timeout in a row).
    pub fn with_connections(mut self, n: usize) -> Self {
        self.connections = n.max(1);
        self
    }

    /// How many connections synced calls use.
    pub fn connections(&self) -> usize {
        self.connections
    }

    /// Which replicas are waited for.
    pub fn replicas(&self) -> Replicas {
        self.replicas
    }

    /// The sync timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The sync command.
    pub fn mode(&self) -> SyncMode {
        self.mode
    }

    /// Whether unacknowledged acquires are retried.
    pub fn retry_acquire(&self) -> bool {
        self.retry_acquire
    }
}

/// Which replicas a [`ReplicaSync`] waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Replicas {
    /// Every replica the primary has online, at most the timeout; the sync fails only when
    /// none acknowledged (Redisson's rule). A primary without replicas is not waited on.
    All,
    /// At least this many; fewer in time fails the sync.
    AtLeast(u32),
}

/// The command a [`ReplicaSync`] waits with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SyncMode {
    /// `WAITAOF` when the server has it (Redis 7.2+) and keeps an append-only file (asked once
    /// at connect), `WAIT` otherwise.
    Auto,
    /// `WAIT`: the replicas received the change.
    Wait,
    /// `WAITAOF`: the replicas wrote the change to their append-only files (fails on servers
    /// without it, and never succeeds with replicas that keep no AOF).
    WaitAof,
}
