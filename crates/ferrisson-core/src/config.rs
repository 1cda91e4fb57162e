//! Client configuration.

use std::time::Duration;

use crate::error::{Error, Result};

/// Which command scripts use to publish wake-up messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum PublishCommand {
    /// `PUBLISH`: a standalone server, a Sentinel-managed primary, or a cluster with classic
    /// pub/sub.
    #[default]
    Publish,
    /// `SPUBLISH`: sharded pub/sub on a Redis 7+ cluster, where a message stays on the shard
    /// of its channel. Chosen by the client ([`ShardedSubscription`]); waiters listen with
    /// `SSUBSCRIBE`.
    Spublish,
}

impl PublishCommand {
    /// The command name as scripts receive it in `ARGV`.
    pub fn as_str(self) -> &'static str {
        match self {
            PublishCommand::Publish => "publish",
            PublishCommand::Spublish => "spublish",
        }
    }
}

/// Whether a cluster client uses sharded pub/sub (`SSUBSCRIBE`/`SPUBLISH`, Redis 7+) for its
/// wake-up messages: Redisson's `shardedSubscriptionMode`, with the same default and the same
/// detection, so that ferrisson and Redisson clients on one cluster publish and listen alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ShardedSubscription {
    /// Sharded when the servers support it: the client asks `PUBSUB SHARDNUMSUB` once at
    /// connect, as Redisson does, and uses classic pub/sub if the command is unknown.
    #[default]
    Auto,
    /// Always sharded (connecting fails on servers without sharded pub/sub).
    On,
    /// Always classic pub/sub, which every node of the cluster relays to every other.
    Off,
}

/// How calls that failed on a broken connection are retried.
///
/// Every call the synchronizers make is idempotent (acquires carry the hold count the client
/// believes it has, releases carry a request id), so a call whose reply was lost can be sent
/// again safely.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts after the first one.
    pub retries: u32,
    /// Pause before the first retry; doubled for each further one.
    pub min_backoff: Duration,
    /// Longest pause between two attempts.
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            retries: 3,
            min_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_secs(1),
        }
    }
}

impl RetryPolicy {
    /// Pause before retry number `retry` (1-based).
    pub fn backoff(&self, retry: u32) -> Duration {
        let factor = 1u32
            .checked_shl(retry.saturating_sub(1))
            .unwrap_or(u32::MAX);
        self.min_backoff
            .checked_mul(factor)
            .unwrap_or(self.max_backoff)
            .min(self.max_backoff)
    }

    /// An upper bound of the time a call and all its retries can take.
    pub fn window(&self, response_timeout: Duration) -> Duration {
        let attempts = self.retries.saturating_add(1);
        response_timeout
            .saturating_add(self.max_backoff)
            .checked_mul(attempts)
            .unwrap_or(Duration::from_secs(3600))
    }
}

/// Settings of a [`Client`](crate::Client).
///
/// One naming rule, as `tokio-postgres`'s `Config`: a setter is named after its setting and
/// returns the config (`.lease(d)`), the getter adds `get_` (`.get_lease()`).
///
/// ```
/// use std::time::Duration;
/// use ferrisson_core::ClientConfig;
///
/// let config = ClientConfig::new("redis://127.0.0.1:6379")
///     .namespace("billing:")
///     .lease(Duration::from_secs(9));
/// assert_eq!(config.get_watchdog_period(), Duration::from_secs(3));
/// ```
#[derive(Debug, Clone)]
pub struct ClientConfig {
    pub(crate) url: String,
    /// Seed nodes of a Redis Cluster (empty: a standalone server at `url`).
    pub(crate) cluster_nodes: Vec<String>,
    pub(crate) namespace: String,
    pub(crate) lease: Duration,
    pub(crate) watchdog_period: Option<Duration>,
    pub(crate) response_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) retry: RetryPolicy,
    pub(crate) publish: PublishCommand,
    pub(crate) sharded: ShardedSubscription,
    pub(crate) wait_outage_limit: Duration,
}

impl Default for ClientConfig {
    /// The defaults of [`new`](ClientConfig::new) for `redis://127.0.0.1:6379`.
    fn default() -> Self {
        Self::new("redis://127.0.0.1:6379")
    }
}

impl std::str::FromStr for ClientConfig {
    type Err = Error;

    /// Default settings for the server at a URL, checked to be one redis-rs can open.
    fn from_str(url: &str) -> Result<Self> {
        redis::Client::open(url)?;
        Ok(Self::new(url))
    }
}

impl ClientConfig {
    /// Settings for the server at `url` (`redis://`, `unix://`, or `rediss://` with the
    /// `tls-rustls` or `tls-native-tls` feature), with defaults
    /// for everything else: a 30 s lease renewed every 10 s, a 3 s response timeout, three
    /// retries of calls that failed on a broken connection.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            cluster_nodes: Vec::new(),
            namespace: String::new(),
            lease: Duration::from_secs(30),
            watchdog_period: None,
            response_timeout: Duration::from_secs(3),
            connect_timeout: Duration::from_secs(3),
            retry: RetryPolicy::default(),
            publish: PublishCommand::Publish,
            sharded: ShardedSubscription::Auto,
            wait_outage_limit: Duration::from_secs(60),
        }
    }

    /// Default settings for a Redis Cluster reached through the seed nodes `nodes` (URLs such
    /// as `redis://10.0.0.1:6379`; any few of the nodes will do, the client discovers the
    /// rest). Every synchronizer keeps all of its keys in one hash slot (Redisson's naming),
    /// so its scripts run on the primary of that slot; the watchdog renews by batches per slot.
    ///
    /// Wake-up messages use sharded pub/sub on servers that have it (Redis 7+, see
    /// [`sharded_subscription`](Self::sharded_subscription)): one subscriber connection per
    /// shard with waiters, following failovers and slot moves. Otherwise classic pub/sub, which
    /// a cluster relays to every node: one subscriber connection to a seed node, the next seed
    /// when it fails.
    pub fn cluster<I, S>(nodes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let nodes: Vec<String> = nodes.into_iter().map(Into::into).collect();
        let mut config = Self::new(nodes.first().cloned().unwrap_or_default());
        config.cluster_nodes = nodes;
        config
    }

    /// The seed nodes, for a cluster client (empty for a standalone server).
    pub fn get_cluster_nodes(&self) -> &[String] {
        &self.cluster_nodes
    }

    /// A prefix put before every object name (e.g. `"billing:"`), so that several applications
    /// can share one Redis. Redisson clients must use the same full names to interoperate.
    pub fn namespace(mut self, prefix: impl Into<String>) -> Self {
        self.namespace = prefix.into();
        self
    }

    /// The lease of holds kept alive by the watchdog (Redisson's `lockWatchdogTimeout`, 30 s by
    /// default). If the client dies, its holds end at most this long after the last renewal.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// How often the watchdog renews leases; a third of the lease by default. Must be shorter
    /// than the lease.
    pub fn watchdog_period(mut self, period: Duration) -> Self {
        self.watchdog_period = Some(period);
        self
    }

    /// How long to wait for a reply before the call counts as failed (and is retried).
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// How long one connection attempt may take.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How calls that failed on a broken connection are retried.
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// The command scripts publish wake-up messages with. A cluster client chooses it itself
    /// (see [`sharded_subscription`](Self::sharded_subscription)), overriding this.
    pub fn publish_command(mut self, command: PublishCommand) -> Self {
        self.publish = command;
        self
    }

    /// Whether a cluster client uses sharded pub/sub ([`ShardedSubscription::Auto`] by
    /// default: when the servers have it). Ignored by standalone and Sentinel clients.
    pub fn sharded_subscription(mut self, mode: ShardedSubscription) -> Self {
        self.sharded = mode;
        self
    }

    /// The sharded pub/sub mode.
    pub fn get_sharded_subscription(&self) -> ShardedSubscription {
        self.sharded
    }

    /// How long a call that is already waiting (for a lock, a permit, a latch) keeps waiting
    /// through a Redis outage before it returns the connection error. 60 s by default.
    pub fn wait_outage_limit(mut self, limit: Duration) -> Self {
        self.wait_outage_limit = limit;
        self
    }

    /// The lease of watchdog-kept holds.
    pub fn get_lease(&self) -> Duration {
        self.lease
    }

    /// How often the watchdog renews leases (a third of the lease unless set).
    pub fn get_watchdog_period(&self) -> Duration {
        self.watchdog_period.unwrap_or(self.lease / 3)
    }

    /// The response timeout.
    pub fn get_response_timeout(&self) -> Duration {
        self.response_timeout
    }

    /// The connect timeout.
    pub fn get_connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    /// The retry policy.
    pub fn get_retry(&self) -> RetryPolicy {
        self.retry
    }

    /// The publish command.
    pub fn get_publish_command(&self) -> PublishCommand {
        self.publish
    }

    /// The outage limit of waiting calls.
    pub fn get_wait_outage_limit(&self) -> Duration {
        self.wait_outage_limit
    }

    /// The namespace prefix.
    pub fn get_namespace(&self) -> &str {
        &self.namespace
    }

    pub(crate) fn validate(&self) -> Result<()> {
        crate::duration::validate_lease("the watchdog lease", self.lease)?;
        if self.lease < Duration::from_millis(10) {
            return Err(Error::InvalidArgument(format!(
                "lease must be at least 10ms, got {:?}",
                self.lease
            )));
        }
        let period = self.get_watchdog_period();
        if period.is_zero() || period >= self.lease {
            return Err(Error::InvalidArgument(format!(
                "watchdog period must be above zero and below the lease ({:?}), got {period:?}",
                self.lease
            )));
        }
        if self.response_timeout.is_zero() || self.connect_timeout.is_zero() {
            return Err(Error::InvalidArgument(
                "response and connect timeouts must be above zero".into(),
            ));
        }
        Ok(())
    }
}
