//! Client configuration.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::replica_sync::ReplicaSync;

mod retry;
mod waits;
pub use retry::{Backoff, RetryPolicy};

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

/// Replica sync as the settings say: the deployment's default, off or on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReplicaSyncSetting {
    /// On for a Cluster or Sentinel client, off for a standalone one.
    Default,
    /// Off ([`ClientConfig::without_replica_sync`]).
    Off,
    /// On with these settings ([`ClientConfig::with_replica_sync`]).
    On(ReplicaSync),
}

/// Settings of a [`Client`](crate::Client).
///
/// One naming rule for every settings type (this one, [`ReplicaSync`], [`AcquireOptions`]): a
/// setter is `with_` and the setting's name and returns the value (`.with_lease(d)`), the
/// getter is the setting's name (`.lease()`).
///
/// [`AcquireOptions`]: crate::AcquireOptions
///
/// ```
/// use std::time::Duration;
/// use ferrisson_core::ClientConfig;
///
/// let config = ClientConfig::new("redis://127.0.0.1:6379")
///     .with_namespace("billing:")
///     .with_lease(Duration::from_secs(9));
/// assert_eq!(config.watchdog_period(), Duration::from_secs(3));
/// ```
#[derive(Debug, Clone)]
pub struct ClientConfig {
    pub(crate) url: String,
    /// Seed nodes of a Redis Cluster (empty: a standalone server at `url`).
    pub(crate) cluster_nodes: Vec<String>,
    /// Sentinels and the name of the primary they watch (none: not a Sentinel set-up).
    pub(crate) sentinel: Option<SentinelSpec>,
    pub(crate) namespace: String,
    pub(crate) lease: Duration,
    pub(crate) watchdog_period: Option<Duration>,
    pub(crate) response_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) retry: RetryPolicy,
    pub(crate) publish: PublishCommand,
    pub(crate) sharded: ShardedSubscription,
    /// `None`: the deployment's default (on for Cluster and Sentinel).
    replica_sync: ReplicaSyncSetting,
    pub(crate) wait_outage_limit: Duration,
    pub(crate) coalesce: bool,
    /// The application's name in the client's record and connection names (`None`: the
    /// binary's name).
    pub(crate) app_name: Option<String>,
    pub(crate) client_record: bool,
    deployment_warning: bool,
    deadlock_detection: Option<Duration>,
    wait_record_delay: Duration,
    pub(crate) metric_names: bool,
    /// Only commands Redis 6.2 knows, whatever the server answers at connect.
    pub(crate) redis_6_compatibility: bool,
    pub(crate) tracked_waits: bool,
}

impl Default for ClientConfig {
    /// The defaults of [`new`](ClientConfig::new) for `redis://127.0.0.1:6379`.
    fn default() -> Self {
        Self::new("redis://127.0.0.1:6379")
    }
}

impl std::str::FromStr for ClientConfig {
    type Err = Error;

    /// Default settings for the deployment a URL names (see [`ClientConfig::new`]), checked
    /// to be one the client can open.
    fn from_str(url: &str) -> Result<Self> {
        let config = Self::new(url).resolved()?;
        if let Some(spec) = &config.sentinel {
            for s in &spec.sentinels {
                open_url(s)?;
            }
        } else if config.cluster_nodes.is_empty() {
            open_url(url)?;
        } else {
            for node in &config.cluster_nodes {
                open_url(node)?;
            }
        }
        Ok(config)
    }
}

/// A Sentinel set-up: where the sentinels are, which primary, and how to log in to it.
#[derive(Clone)]
pub(crate) struct SentinelSpec {
    pub(crate) sentinels: Vec<String>,
    pub(crate) primary_name: String,
    pub(crate) username: Option<String>,
    pub(crate) password: Option<String>,
    pub(crate) db: i64,
    pub(crate) tls: bool,
}

impl std::fmt::Debug for SentinelSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SentinelSpec")
            .field("sentinels", &self.sentinels)
            .field("primary_name", &self.primary_name)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "…"))
            .field("db", &self.db)
            .field("tls", &self.tls)
            .finish()
    }
}

/// `url` with its password hidden, for error messages.
fn redact(url: &str) -> String {
    match (url.split_once("://"), url.rsplit_once('@')) {
        (Some((scheme, rest)), Some((auth, hosts))) if rest.len() > hosts.len() => {
            let user = auth
                .split_once("://")
                .map_or(auth, |(_, a)| a)
                .split(':')
                .next()
                .unwrap_or_default();
            format!("{scheme}://{user}:…@{hosts}")
        }
        _ => url.to_owned(),
    }
}

/// A `redis::Client` for one server's URL, or an error that shows the URL (password hidden)
/// and what a Redis URL looks like.
pub(crate) fn open_url(url: &str) -> Result<redis::Client> {
    redis::Client::open(url).map_err(|e| Error::InvalidArgument(url_problem(url, &e.to_string())))
}

/// What is wrong with `url` as a Redis URL (`detail`: what redis-rs said), and how to write it.
fn url_problem(url: &str, detail: &str) -> String {
    const FORMS: &str = "redis://[user:password@]host:port[/db], rediss://… with a TLS feature, unix:///path/to/redis.sock, redis-cluster://host:port,host:port or redis-sentinel://host:port,…/primary-name";
    let shown = redact(url);
    if url.trim().is_empty() {
        return format!("no Redis URL given: expected {FORMS}");
    }
    match url.split_once("://") {
        None => format!(
            "`{shown}` is not a Redis URL (it has no scheme): write `redis://{shown}` for a server at that address; expected {FORMS}"
        ),
        Some((scheme, _))
            if !matches!(
                scheme,
                "redis" | "rediss" | "unix" | "redis+unix" | "valkey" | "valkeys"
            ) =>
        {
            format!("`{shown}`: `{scheme}://` is not a Redis URL scheme; expected {FORMS}")
        }
        Some(_) => format!("`{shown}` is not a valid Redis URL ({detail}); expected {FORMS}"),
    }
}

impl ClientConfig {
    /// Where a client with these settings connects, for messages: the URL without its
    /// password, a cluster's seed nodes, or a Sentinel set-up's sentinels and primary name.
    pub(crate) fn address(&self) -> String {
        if let Some(spec) = &self.sentinel {
            let sentinels: Vec<String> = spec.sentinels.iter().map(|s| redact(s)).collect();
            return format!(
                "primary `{}` of the sentinels {}",
                spec.primary_name,
                sentinels.join(",")
            );
        }
        if !self.cluster_nodes.is_empty() {
            let nodes: Vec<String> = self.cluster_nodes.iter().map(|n| redact(n)).collect();
            return format!("the cluster of {}", nodes.join(","));
        }
        redact(&self.url)
    }

    /// Settings for the server at `url`, with defaults for everything else. The URL names the
    /// deployment:
    ///
    /// - `redis://[user:password@]host:port[/db]`, `unix://…`, or `rediss://…` with the
    ///   `tls-rustls` or `tls-native-tls` feature: one standalone server;
    /// - `redis-cluster://[user:password@]host:port,host:port,…` (or `rediss-cluster://`): a
    ///   Redis Cluster through these seed nodes, as [`cluster`](Self::cluster);
    /// - `redis-sentinel://[user:password@]host:port,host:port,…/primary-name[/db]` (or
    ///   `rediss-sentinel://`): the primary that these sentinels name `primary-name`, as
    ///   [`sentinel`](Self::sentinel); the credentials and db are the primary's.
    ///
    /// The defaults
    /// for everything else: a 30 s lease renewed every 10 s, a 3 s response timeout, three
    /// retries of calls that failed on a broken connection.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            cluster_nodes: Vec::new(),
            sentinel: None,
            namespace: String::new(),
            lease: Duration::from_secs(30),
            watchdog_period: None,
            response_timeout: Duration::from_secs(3),
            connect_timeout: Duration::from_secs(3),
            retry: RetryPolicy::default(),
            publish: PublishCommand::Publish,
            sharded: ShardedSubscription::Auto,
            replica_sync: ReplicaSyncSetting::Default,
            wait_outage_limit: Duration::from_secs(60),
            coalesce: false,
            app_name: None,
            client_record: true,
            deployment_warning: true,
            deadlock_detection: None,
            wait_record_delay: crate::waits::WAIT_RECORD_AFTER,
            metric_names: false,
            redis_6_compatibility: false,
            tracked_waits: true,
        }
    }

    /// Default settings for a Redis Cluster reached through the seed nodes `nodes` (URLs such
    /// as `redis://10.0.0.1:6379`; any few of the nodes will do, the client discovers the
    /// rest). Every synchronizer keeps all of its keys in one hash slot (Redisson's naming),
    /// so its scripts run on the primary of that slot; the watchdog renews by batches per slot.
    ///
    /// Wake-up messages use sharded pub/sub on servers that have it (Redis 7+, see
    /// [`with_sharded_subscription`](Self::with_sharded_subscription)): one subscriber connection per
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

    /// The name the client gives its application **\[ext\]**: its connections are named
    /// `ferrisson:<app>:<tag>` (`CLIENT SETNAME`, shown by `CLIENT LIST`) and its record
    /// (see [`with_client_record`](Self::with_client_record)) says it, so that an operator sees
    /// which service holds a lock. Default: the running binary's file name.
    pub fn with_app_name(mut self, app: impl Into<String>) -> Self {
        self.app_name = Some(app.into());
        self
    }

    /// The application name set with [`with_app_name`](Self::with_app_name), if any.
    pub fn app_name(&self) -> Option<&str> {
        self.app_name.as_deref()
    }

    /// Whether the client keeps a record of itself in Redis **\[ext\]** (default: on): a small
    /// hash under `ferrisson_client:<tag>` (its id, app name, host, pid, crate version and
    /// start time) that lives one lease and is rewritten every watchdog period while the
    /// client lives, so that `Client::inspect` and the `ferrisson` command-line tool name the
    /// process behind a holder, a waiter or a permit. A process that dies leaves its record
    /// for at most one lease; [`Client::shutdown`](crate::Client::shutdown) deletes it. Off,
    /// the client writes no key of its own (its connections are still named).
    pub fn with_client_record(mut self, on: bool) -> Self {
        self.client_record = on;
        self
    }

    /// Whether the client keeps a record of itself ([`with_client_record`](Self::with_client_record)).
    pub fn client_record(&self) -> bool {
        self.client_record
    }

    /// Whether the client, once connected, reads the server's `INFO` in the background and
    /// logs one warning (`tracing`, target `ferrisson_core::doctor`) naming each guarantee the
    /// deployment breaks: an evicting `maxmemory-policy`, no AOF, replicas nobody waits for
    /// (default: on). The whole report, with the fixes: `Client::check_deployment`,
    /// `ferrisson doctor`.
    pub fn with_deployment_warning(mut self, on: bool) -> Self {
        self.deployment_warning = on;
        self
    }

    /// Whether the client warns of broken guarantees at connect
    /// ([`with_deployment_warning`](Self::with_deployment_warning)).
    pub fn deployment_warning(&self) -> bool {
        self.deployment_warning
    }

    /// Whether the metrics of acquisitions, waits, timeouts and holds carry a `name` label
    /// with the object's key (feature `metrics`; default: off, `kind` only).
    ///
    /// **Cardinality.** Every distinct name becomes a time series per metric (and a
    /// histogram's buckets each): turn it on only where the names are few and fixed (a
    /// handful of locks, one semaphore per partner API), never where names carry ids (a
    /// lock per order, per user), or the metrics backend pays for every one of them.
    pub fn with_metric_names(mut self, on: bool) -> Self {
        self.metric_names = on;
        self
    }

    /// Whether metrics carry the `name` label ([`with_metric_names`](Self::with_metric_names)).
    pub fn metric_names(&self) -> bool {
        self.metric_names
    }

    /// The seed nodes, for a cluster client (empty for a standalone server).
    pub fn cluster_nodes(&self) -> &[String] {
        &self.cluster_nodes
    }

    /// Default settings for the primary that Redis Sentinel watches under `primary_name`,
    /// asked of the sentinels at `sentinels` (URLs such as `redis://10.0.0.1:26379`). The
    /// client follows failovers: when the primary stops answering or turns replica, it asks
    /// the sentinels again and moves its commands, subscriber connection and renewals to the
    /// new primary. Credentials for the primary: [`primary_credentials`](Self::primary_credentials).
    pub fn sentinel<I, S>(sentinels: I, primary_name: impl Into<String>) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut config = Self::new("");
        config.sentinel = Some(SentinelSpec {
            sentinels: sentinels.into_iter().map(Into::into).collect(),
            primary_name: primary_name.into(),
            username: None,
            password: None,
            db: 0,
            tls: false,
        });
        config
    }

    /// The user name (`None`: the default user) and password of the primary (and its
    /// replicas) of a Sentinel set-up. Ignored by other clients, whose URLs carry them.
    pub fn primary_credentials(
        mut self,
        username: Option<&str>,
        password: impl Into<String>,
    ) -> Self {
        if let Some(spec) = &mut self.sentinel {
            spec.username = username.map(str::to_owned);
            spec.password = Some(password.into());
        }
        self
    }

    /// The sentinels and primary name of a Sentinel client.
    pub fn sentinels(&self) -> Option<(&[String], &str)> {
        self.sentinel
            .as_ref()
            .map(|s| (s.sentinels.as_slice(), s.primary_name.as_str()))
    }

    /// The deployment the settings name: the URL's scheme decides, unless
    /// [`cluster`](Self::cluster) or [`sentinel`](Self::sentinel) made the config.
    pub(crate) fn resolved(mut self) -> Result<Self> {
        if !self.cluster_nodes.is_empty() || self.sentinel.is_some() {
            return Ok(self);
        }
        let Some((scheme, rest)) = self.url.split_once("://") else {
            return Ok(self);
        };
        let (tls, kind) = match scheme {
            "redis-cluster" => (false, "cluster"),
            "rediss-cluster" => (true, "cluster"),
            "redis-sentinel" => (false, "sentinel"),
            "rediss-sentinel" => (true, "sentinel"),
            _ => return Ok(self),
        };
        let bad = |why: &str| {
            Error::InvalidArgument(format!(
                "`{}`: {why} (expected {scheme}://[user:password@]host:port,host:port{})",
                redact(&self.url),
                if kind == "sentinel" {
                    "/primary-name[/db]"
                } else {
                    ""
                }
            ))
        };
        let (auth, rest) = match rest.rsplit_once('@') {
            Some((auth, rest)) => (Some(auth), rest),
            None => (None, rest),
        };
        let (hosts, path) = match rest.split_once('/') {
            Some((hosts, path)) => (hosts, path),
            None => (rest, ""),
        };
        let hosts: Vec<&str> = hosts.split(',').filter(|h| !h.is_empty()).collect();
        if hosts.is_empty() {
            return Err(bad("no host"));
        }
        let plain = if tls { "rediss" } else { "redis" };
        if kind == "cluster" {
            if !path.trim_matches('/').is_empty() {
                return Err(bad("a cluster has no db or primary name"));
            }
            let auth = auth.map(|a| format!("{a}@")).unwrap_or_default();
            self.cluster_nodes = hosts
                .iter()
                .map(|h| format!("{plain}://{auth}{h}"))
                .collect();
            self.url = self.cluster_nodes[0].clone();
            return Ok(self);
        }
        let mut parts = path.split('/').filter(|p| !p.is_empty());
        let primary_name = parts.next().ok_or_else(|| bad("no primary name"))?;
        let db = match parts.next() {
            Some(db) => db
                .parse::<i64>()
                .map_err(|_| bad("the db is not a number"))?,
            None => 0,
        };
        let (username, password) = match auth {
            Some(auth) => match auth.split_once(':') {
                Some((user, password)) => (
                    (!user.is_empty()).then(|| user.to_owned()),
                    Some(password.to_owned()),
                ),
                None => (Some(auth.to_owned()), None),
            },
            None => (None, None),
        };
        self.sentinel = Some(SentinelSpec {
            sentinels: hosts.iter().map(|h| format!("{plain}://{h}")).collect(),
            primary_name: primary_name.to_owned(),
            username,
            password,
            db,
            tls,
        });
        Ok(self)
    }

    /// A prefix put before every object name (e.g. `"billing:"`), so that several applications
    /// can share one Redis. Redisson clients must use the same full names to interoperate.
    pub fn with_namespace(mut self, prefix: impl Into<String>) -> Self {
        self.namespace = prefix.into();
        self
    }

    /// The lease of holds kept alive by the watchdog (Redisson's `lockWatchdogTimeout`, 30 s by
    /// default). If the client dies, its holds end at most this long after the last renewal.
    pub fn with_lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// How often the watchdog renews leases; a third of the lease by default. Must be shorter
    /// than the lease.
    pub fn with_watchdog_period(mut self, period: Duration) -> Self {
        self.watchdog_period = Some(period);
        self
    }

    /// How long to wait for a reply before the call counts as failed (and is retried).
    pub fn with_response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// How long one connection attempt may take.
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How calls that failed on a broken connection are retried.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// The command scripts publish wake-up messages with. A cluster client chooses it itself
    /// (see [`with_sharded_subscription`](Self::with_sharded_subscription)), overriding this.
    pub fn with_publish_command(mut self, command: PublishCommand) -> Self {
        self.publish = command;
        self
    }

    /// Whether a cluster client uses sharded pub/sub ([`ShardedSubscription::Auto`] by
    /// default: when the servers have it). Ignored by standalone and Sentinel clients.
    pub fn with_sharded_subscription(mut self, mode: ShardedSubscription) -> Self {
        self.sharded = mode;
        self
    }

    /// Turns replica sync on with these settings (for a standalone primary with replicas too).
    pub fn with_replica_sync(mut self, sync: ReplicaSync) -> Self {
        self.replica_sync = ReplicaSyncSetting::On(sync);
        self
    }

    /// Turns replica sync off (Redisson's `checkLockSyncedSlaves = false`): no `WAIT` after
    /// the scripts, one round trip less per call, and a failover may lose what the replicas
    /// had not received yet.
    pub fn without_replica_sync(mut self) -> Self {
        self.replica_sync = ReplicaSyncSetting::Off;
        self
    }

    /// The replica sync settings: those set, else the deployment's default (on with
    /// [`ReplicaSync::default`] for a Cluster or Sentinel client, off for a standalone one).
    pub fn replica_sync(&self) -> Option<ReplicaSync> {
        match self.replica_sync {
            ReplicaSyncSetting::On(sync) => Some(sync),
            ReplicaSyncSetting::Off => None,
            ReplicaSyncSetting::Default
                if !self.cluster_nodes.is_empty() || self.sentinel.is_some() =>
            {
                Some(ReplicaSync::default())
            }
            ReplicaSyncSetting::Default => None,
        }
    }

    /// The sharded pub/sub mode.
    pub fn sharded_subscription(&self) -> ShardedSubscription {
        self.sharded
    }

    /// How long a call that is already waiting (for a lock, a permit, a latch) keeps waiting
    /// through a Redis outage before it returns the connection error. 60 s by default.
    pub fn with_wait_outage_limit(mut self, limit: Duration) -> Self {
        self.wait_outage_limit = limit;
        self
    }

    /// Whether script calls that the client's tasks make at the same time go to Redis as one
    /// call per script (and slot), which runs them one after the other (off by default). Each
    /// call's outcome is the one it would have alone, and Redis receives fewer commands (one
    /// per batch), which matters where commands are billed or rate-limited; but every call
    /// then goes through one dispatcher task, which on the project's bench machine cost
    /// throughput under concurrency (64 tasks locking distinct keys: about 50 k lock + unlock
    /// pairs per second coalesced, 71 k not) and saved none ([`docs/architecture.md`](https://github.com/ferrisson/ferrisson/blob/main/docs/architecture.md),
    /// "Coalescing"). Off, every call is its own `EVALSHA`, pipelined on the connection.
    pub fn with_coalesce_calls(mut self, on: bool) -> Self {
        self.coalesce = on;
        self
    }

    /// Whether the client keeps to the commands Redis 6.2 knows, whatever the server it
    /// connects to answers (off by default). The client asks the server's version at connect
    /// (in the script call that checks its rights) and, on a server before 7.0, keeps to them
    /// by itself: the [`Mutex`](https://docs.rs/ferrisson-lock)'s unfenced first try, `SET key
    /// token NX PX lease GET` on 7.0+, is then its acquire script. Set this during a rolling
    /// upgrade whose nodes run both, or to try the older path on a new server.
    pub fn with_redis_6_compatibility(mut self, on: bool) -> Self {
        self.redis_6_compatibility = on;
        self
    }

    /// Whether a waiter behind a holder whose release publishes nothing (another Redlock
    /// client's hold on a [`Mutex`](https://docs.rs/ferrisson-lock)) asks Redis to tell it of
    /// the key's next change (`CLIENT TRACKING … OPTIN` on the command connection, redirected
    /// to the subscriber connection; on by default, not on a cluster), instead of looking
    /// again every 100 to 200 ms. Needs the rights `client|tracking` and `client|caching`;
    /// without them the client re-checks as with this off.
    pub fn with_tracked_waits(mut self, on: bool) -> Self {
        self.tracked_waits = on;
        self
    }

    /// Whether concurrent script calls are coalesced ([`with_coalesce_calls`](Self::with_coalesce_calls)).
    pub fn coalesce_calls(&self) -> bool {
        self.coalesce
    }

    /// The lease of watchdog-kept holds.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// How often the watchdog renews leases (a third of the lease unless set).
    pub fn watchdog_period(&self) -> Duration {
        self.watchdog_period.unwrap_or(self.lease / 3)
    }

    /// The response timeout.
    pub fn response_timeout(&self) -> Duration {
        self.response_timeout
    }

    /// The connect timeout.
    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    /// The retry policy.
    pub fn retry(&self) -> RetryPolicy {
        self.retry
    }

    /// The publish command.
    pub fn publish_command(&self) -> PublishCommand {
        self.publish
    }

    /// The outage limit of waiting calls.
    pub fn wait_outage_limit(&self) -> Duration {
        self.wait_outage_limit
    }

    /// The namespace prefix.
    pub fn namespace(&self) -> &str {
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
        let period = self.watchdog_period();
        if period.is_zero() || period >= self.lease {
            return Err(Error::InvalidArgument(format!(
                "watchdog period must be above zero and below the lease ({:?}), got {period:?}",
                self.lease
            )));
        }
        if let Some(sync) = self.replica_sync()
            && (sync.timeout.is_zero() || sync.timeout >= self.response_timeout)
        {
            return Err(Error::InvalidArgument(format!(
                "the replica sync timeout must be above zero and below the response timeout ({:?}), which a WAIT's reply must beat; got {:?}",
                self.response_timeout, sync.timeout
            )));
        }
        if self.response_timeout.is_zero() || self.connect_timeout.is_zero() {
            return Err(Error::InvalidArgument(
                "response and connect timeouts must be above zero".into(),
            ));
        }
        if let Some(interval) = self.deadlock_detection {
            if interval < Duration::from_millis(10) || interval > Duration::from_secs(86_400) {
                return Err(Error::InvalidArgument(format!(
                    "the deadlock detection interval must be between 10ms and a day, got {interval:?}"
                )));
            }
            if !self.client_record {
                return Err(Error::InvalidArgument(
                    "deadlock detection reads the waits in clients' records: it needs the client's record (ClientConfig::with_client_record(true))".into(),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn cluster_urls_become_seed_nodes_with_their_credentials() {
        let config = ClientConfig::new("redis-cluster://u:p@10.0.0.1:7000,10.0.0.2:7001")
            .resolved()
            .unwrap();
        assert_eq!(
            config.cluster_nodes(),
            ["redis://u:p@10.0.0.1:7000", "redis://u:p@10.0.0.2:7001"]
        );
        let tls = ClientConfig::new("rediss-cluster://h:1")
            .resolved()
            .unwrap();
        assert_eq!(tls.cluster_nodes(), ["rediss://h:1"]);
        assert!(ClientConfig::new("redis-cluster://").resolved().is_err());
        assert!(
            ClientConfig::new("redis-cluster://h:1/3")
                .resolved()
                .is_err()
        );
    }

    #[test]
    fn sentinel_urls_name_the_sentinels_the_primary_and_its_login() {
        let config = ClientConfig::new("redis-sentinel://:secret@s1:26379,s2:26380/main/2")
            .resolved()
            .unwrap();
        let spec = config.sentinel.as_ref().unwrap();
        assert_eq!(spec.sentinels, ["redis://s1:26379", "redis://s2:26380"]);
        assert_eq!(spec.primary_name, "main");
        assert_eq!(spec.db, 2);
        assert_eq!(spec.username, None);
        assert_eq!(spec.password.as_deref(), Some("secret"));
        assert!(!format!("{spec:?}").contains("secret"));
        let with_user = ClientConfig::new("redis-sentinel://app:pw@s1:1/main")
            .resolved()
            .unwrap();
        let spec = with_user.sentinel.as_ref().unwrap();
        assert_eq!(
            (spec.username.as_deref(), spec.password.as_deref(), spec.db),
            (Some("app"), Some("pw"), 0)
        );
        for bad in [
            "redis-sentinel://s1:1",
            "redis-sentinel://s1:1/",
            "redis-sentinel:///main",
            "redis-sentinel://s1:1/main/x",
        ] {
            let err = ClientConfig::new(bad).resolved().unwrap_err();
            assert!(matches!(err, Error::InvalidArgument(_)), "{bad}: {err}");
        }
        let err = ClientConfig::new("redis-sentinel://u:topsecret@/main")
            .resolved()
            .unwrap_err();
        assert!(!err.to_string().contains("topsecret"), "{err}");
        assert!("redis-sentinel://s1:1/main".parse::<ClientConfig>().is_ok());
        assert!("redis://h:1".parse::<ClientConfig>().is_ok());
    }
}
