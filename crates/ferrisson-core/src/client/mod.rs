//! The client: one command connection, one subscriber connection, one watchdog.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use redis::Value;
use redis::aio::ConnectionManagerConfig;

use crate::batch::Batcher;

mod deployment;
mod engine;
mod shutdown;
mod upkeep;
pub use engine::ClientEngine;
pub(crate) use engine::warn_unsynced;

use crate::config::ClientConfig;
use crate::config::{PublishCommand, ShardedSubscription};
use crate::connection::{Connection, Opener};
use crate::error::{Error, Result};
use crate::owner::Owner;
use crate::pubsub::{Hub, Source};
use crate::replication::Replication;
use crate::watchdog::Watchdog;

pub(crate) struct Inner {
    id: String,
    config: ClientConfig,
    pub(crate) conn: Connection,
    batcher: Batcher,
    replication: Arc<Replication>,
    hub: Hub,
    watchdog: Watchdog,
    releasing: Arc<crate::releasing::Releasing>,
    /// The client's id as its own keys carry it (records, undone marks: `Client::client_latch`).
    latch_id: crate::keys::RequestId,
    /// The last sequence number handed out to a call in a record (`Client::next_seq`).
    call_seq: std::sync::atomic::AtomicU64,
    /// What [`Client::shutdown`] waits for: the cleanups of dropped guards and abandoned calls
    /// (releases, undos, queue exits), and the acquisitions in flight, which a shutdown ends.
    tasks: tokio_util::task::TaskTracker,
    /// Cancelled by [`Client::shutdown`]: new acquisitions are refused and waiting ones end.
    pub(crate) closing: tokio_util::sync::CancellationToken,
    /// The holds and permits of live guards, which a shutdown gives back.
    pub(crate) holds: Arc<crate::holds::Holds>,
    /// Where the client connects (passwords hidden), for errors ([`Error::Unreachable`]).
    address: String,
    /// Who the client is, for operators: its connections' name and its record.
    pub(crate) identity: crate::identity::Identity,
    /// The slot pools of the client's call records on objects (`crate::record`).
    pub(crate) record_pools: crate::record_slots::RecordPools,
    /// The waits of the client's tasks, for the record (`crate::waits`); `None` when the client
    /// keeps no record.
    waits: Option<Arc<crate::waits::Waits>>,
    /// The server's version as `redis.REDIS_VERSION_NUM` gives it (`0x070200` for 7.2.0),
    /// asked at connect; 0 for a server before 7.0, which has no such number.
    server_version: u32,
}

/// A connection to Redis shared by every synchronizer made from it. Cheap to clone: clones
/// share the connections, the watchdog and the client id.
///
/// A client holds one multiplexed command connection (reconnecting by itself), one subscriber
/// connection shared by all of its waiters, and one watchdog task renewing all of its leases.
/// Its background tasks run on the Tokio runtime it was created on and stop when the last
/// clone is dropped; holds still kept then end when their lease runs out.
///
/// ```no_run
/// # async fn demo() -> ferrisson_core::Result<()> {
/// let client = ferrisson_core::Client::connect("redis://127.0.0.1:6379").await?;
/// assert_eq!(client.id().len(), 36);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.inner.id)
            .field("namespace", &self.inner.config.namespace)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// The `name` label of `key`'s metrics: the key when the config asks for name labels
    /// ([`ClientConfig::with_metric_names`]).
    pub(crate) fn metric_name(&self, key: &str) -> Option<Arc<str>> {
        self.inner.config.metric_names().then(|| Arc::from(key))
    }

    /// The hub, where local hand-offs are claimed, unless replica sync is on: a hand-off is an
    /// acquisition made by the releaser's script, and with replica sync every acquisition goes
    /// through its own synced call, which rolls back what the replicas did not get.
    fn hand_offs(&self) -> Option<&Hub> {
        (!self.inner.replication.enabled()).then_some(&self.inner.hub)
    }

    /// Queues a waiter for `need` on the hub's local channel `channel`
    /// ([`LocalWaiters`](crate::local::LocalWaiters)).
    pub(crate) fn local_waiter(
        &self,
        channel: &str,
        need: crate::pubsub::Need,
    ) -> crate::pubsub::Subscription {
        self.inner.hub.subscribe_local(channel, need)
    }

    /// The waits of the client's tasks, when it keeps a record (`crate::waits`).
    pub(crate) fn waits(&self) -> Option<&Arc<crate::waits::Waits>> {
        self.inner.waits.as_ref()
    }

    /// Whether waiters of this client wait on `channel`.
    pub(crate) fn has_local_waiters(&self, channel: &str) -> bool {
        self.inner.hub.has_waiters(channel)
    }

    /// Connects to the server at `url` with default settings.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when the URL is malformed (the message shows it, and the forms
    /// a URL takes), [`Error::Unreachable`] when the server cannot be reached (naming it, and
    /// what to check), [`Error::Closed`] outside a Tokio runtime.
    pub async fn connect(url: &str) -> Result<Self> {
        Self::with_config(ClientConfig::new(url)).await
    }

    /// Connects with the given settings.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for inconsistent settings or a malformed URL,
    /// [`Error::Unreachable`] when the server cannot be reached, [`Error::Closed`] outside a
    /// Tokio runtime.
    pub async fn with_config(config: ClientConfig) -> Result<Self> {
        let mut config = config.resolved()?;
        let address = config.address();
        if let Some(spec) = config.sentinel.clone() {
            config.validate()?;
            runtime_check()?;
            if spec.sentinels.is_empty() {
                return Err(Error::InvalidArgument(
                    "a Sentinel client needs at least one sentinel address".into(),
                ));
            }
            let opener = Opener::Sentinel(spec, manager_config(&config), config.connect_timeout);
            let conn = opener
                .open()
                .await
                .map_err(|e| connect_error(e, &address))?;
            let Some(primary) = conn.sentinel() else {
                return Err(Error::Protocol(
                    "a Sentinel opener made another connection".into(),
                ));
            };
            let source = Source::sentinel(primary.clone());
            return Self::start(source, conn, opener, config, address).await;
        }
        if config.cluster_nodes.is_empty() {
            let redis_client = crate::config::open_url(&config.url)?;
            return Self::connect_standalone(redis_client, config, address).await;
        }
        config.validate()?;
        runtime_check()?;
        let (nodes, connect_timeout, response_timeout, retries) = (
            config.cluster_nodes.clone(),
            config.connect_timeout,
            config.response_timeout,
            config.retry.retries,
        );
        let builder = Arc::new(move || {
            redis::cluster::ClusterClient::builder(nodes.clone())
                .connection_timeout(connect_timeout)
                .response_timeout(response_timeout)
                .retries(retries)
        });
        let opener = Opener::Cluster(builder.clone());
        let conn = opener
            .open()
            .await
            .map_err(|e| connect_error(e, &address))?;
        let sharded = match config.sharded {
            ShardedSubscription::On => true,
            ShardedSubscription::Off => false,
            ShardedSubscription::Auto => supports_sharded_pubsub(&conn).await?,
        };
        let source = if sharded {
            config.publish = PublishCommand::Spublish;
            Source::Sharded(builder)
        } else {
            config.publish = PublishCommand::Publish;
            let seeds = config
                .cluster_nodes
                .iter()
                .map(|node| crate::config::open_url(node))
                .collect::<Result<Vec<_>>>()?;
            Source::rotating(seeds)
        };
        tracing::debug!(sharded, "cluster client: pub/sub mode chosen");
        Self::start(source, conn, opener, config, address).await
    }

    /// Connects through an existing `redis::Client` (its address, credentials and TLS
    /// settings), with the other settings of `config` (whose URL is not used).
    ///
    /// The connection is checked with a `PING` before this returns, so that a missing or
    /// wrong password is reported here, not at the first lock call.
    ///
    /// # Errors
    ///
    /// As [`with_config`](Self::with_config).
    pub async fn from_redis_client(
        redis_client: redis::Client,
        config: ClientConfig,
    ) -> Result<Self> {
        let address = redis_client.get_connection_info().addr().to_string();
        Self::connect_standalone(redis_client, config, address).await
    }

    async fn connect_standalone(
        redis_client: redis::Client,
        config: ClientConfig,
        address: String,
    ) -> Result<Self> {
        config.validate()?;
        runtime_check()?;
        let opener = Opener::Standalone(redis_client.clone(), manager_config(&config));
        let conn = opener
            .open()
            .await
            .map_err(|e| connect_error(e, &address))?;
        Self::start(Source::fixed(redis_client), conn, opener, config, address).await
    }

    /// Checks the connection (authentication, permissions) and starts the hub and the watchdog.
    async fn start(
        source: Source,
        conn: Connection,
        opener: Opener,
        config: ClientConfig,
        address: String,
    ) -> Result<Self> {
        // Authentication errors surface at the first command: make that one ours.
        let pong = conn
            .query(&redis::cmd("PING"))
            .await
            .map_err(|e| connect_error(e, &address))?;
        if !matches!(&pong, Value::SimpleString(s) if s == "PONG") {
            return Err(Error::Protocol(format!("PING answered {pong:?}")));
        }
        let server_version = check_rights(&conn, &config, &address).await?;
        let replication = Replication::start(config.replica_sync(), &conn, &opener)
            .await
            .map_err(|e| match e.kind() {
                redis::ErrorKind::InvalidClientConfig => Error::InvalidArgument(e.to_string()),
                _ => Error::Redis(e),
            })?;
        let replication = Arc::new(replication);
        if !config.tracked_waits {
            conn.tracking().disable();
        }
        let hub = Hub::start(
            conn.tracking().clone(),
            source,
            config.connect_timeout,
            config.response_timeout,
            config.retry,
        );
        let watchdog = Watchdog::start(
            conn.clone(),
            replication.clone(),
            config.watchdog_period(),
            config.response_timeout,
        );
        let uuid = uuid::Uuid::new_v4();
        let id = uuid.hyphenated().to_string();
        tracing::debug!(client_id = %id, "client connected");
        crate::metrics::describe_once();
        let (period, lease) = (config.watchdog_period(), config.lease());
        let identity = crate::identity::Identity::new(
            &id,
            config.app_name(),
            (lease, period),
            config.deadlock_detection().is_some(),
        );
        let config_records = config.client_record();
        let client = Self {
            inner: Arc::new(Inner {
                id,
                batcher: Batcher::start(conn.clone(), config.coalesce),
                config,
                conn,
                replication,
                hub,
                watchdog,
                releasing: Arc::default(),
                latch_id: crate::keys::RequestId::of_client(&uuid),
                call_seq: std::sync::atomic::AtomicU64::new(0),
                tasks: tokio_util::task::TaskTracker::new(),
                closing: tokio_util::sync::CancellationToken::new(),
                holds: Arc::default(),
                address,
                identity,
                record_pools: crate::record_slots::RecordPools::default(),
                waits: config_records.then(Arc::default),
                server_version,
            }),
        };
        // Named and recorded before the client is handed out, then kept so while it lives.
        let mut upkeep = upkeep::Upkeep::new(client.inner.config.client_record());
        upkeep::refresh(&client, &mut upkeep, lease).await;
        tokio::spawn(upkeep::keep_identity(
            Arc::downgrade(&client.inner),
            upkeep,
            period,
            lease,
        ));
        deployment::warn_at_connect(&client);
        Ok(client)
    }

    /// Where the client connects: the URL without its password, a cluster's seed nodes, or a
    /// Sentinel set-up's sentinels and primary name.
    pub fn address(&self) -> &str {
        &self.inner.address
    }

    /// Whether [`shutdown`](Self::shutdown) was called (on this client or a clone).
    pub fn is_shut_down(&self) -> bool {
        self.inner.closing.is_cancelled()
    }

    /// The client id: a random UUID v4, the first part of every owner of this client.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The name of the client's connections (`CLIENT SETNAME`): `ferrisson:<app>:<tag>`, the
    /// app's name from [`ClientConfig::with_app_name`] (default: the binary's name) and the
    /// client's tag, the first 16 hex digits of its id.
    pub fn connection_name(&self) -> String {
        self.inner.identity.connection_name()
    }

    /// The settings the client runs with.
    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    /// Whether the client may send commands that Redis 7.0 brought (`SET … NX … GET`): the
    /// server answered 7.0 or later at connect, and
    /// [`with_redis_6_compatibility`](ClientConfig::with_redis_6_compatibility) is off.
    pub fn has_redis_7_commands(&self) -> bool {
        self.inner.server_version >= 0x07_00_00 && !self.inner.config.redis_6_compatibility
    }

    /// A new owner, distinct from every other: bind it to a handle (`owned_by`) for holds that
    /// re-enter, or that one task takes and another releases (see [`Owner`]).
    pub fn new_owner(&self) -> Owner {
        Owner::fresh(&self.inner.id)
    }

    /// Channels currently subscribed (or being subscribed), and the client's waiters: on those
    /// channels, and a RedLock's queued for a hand-off in this process (no channel of Redis's).
    pub fn waiter_stats(&self) -> (usize, usize) {
        self.inner.hub.stats()
    }

    /// Waiters of this client asleep until a release (a message, a hand-off, or their wait's
    /// bound), not already handed anything or woken: the ones a release by this client can
    /// hand what it frees to, in the release call itself. A waiter trying right now, or about
    /// to, is not counted. For diagnostics and tests, as [`waiter_stats`](Self::waiter_stats).
    pub fn parked_waiters(&self) -> usize {
        self.inner.hub.parked()
    }

    /// How many renewal script calls the watchdog has sent.
    pub fn renewal_calls(&self) -> u64 {
        self.inner.watchdog.renew_calls()
    }

    /// The one retry loop: runs `attempt(n)` for n = 0, 1, … while it fails on a broken
    /// connection, pausing per the retry policy, for up to the policy's retries; with a
    /// `settle` window, on past them while a failure may have come after the call reached
    /// Redis (anything but a refused connection), until the window would be passed.
    async fn retry_loop<T, F, Fut>(&self, mut attempt: F, settle: Option<Duration>) -> Result<T>
    where
        F: FnMut(u32) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let policy = self.inner.config.retry;
        let started = tokio::time::Instant::now();
        // A call that changes state is not sent after the window (a wait for the scripts to
        // load can hold an attempt up): a later resend could find the records that resolve it
        // expired, and run twice.
        let by = settle.map(|window| crate::time::later(started, window));
        let mut maybe_ran = false;
        // Since when every attempt has been refused (the server is down: what a lost reply
        // left unknown cannot be resolved now).
        let mut refused_since: Option<tokio::time::Instant> = None;
        let patience = self.inner.config.connect_timeout;
        let mut n: u32 = 0;
        loop {
            // (The first attempt has nothing to resolve: it goes whenever it can.)
            let by = by.filter(|_| n > 0);
            match crate::connection::sending_by(by, attempt(n)).await {
                Err(e) if e.is_connection_error() => {
                    maybe_ran |= !e.is_refused_connection();
                    refused_since = if e.is_refused_connection() {
                        refused_since.or_else(|| Some(tokio::time::Instant::now()))
                    } else {
                        None
                    };
                    let pause = policy.pause(n.saturating_add(1));
                    // A server that has refused every connection for a connect timeout is down: the call's answer is the error now, not at the end of
                    // the window. What the lost reply left unknown is the caller's cleanup's
                    // (an abandoned acquire's undo, a release's resend), in the background.
                    let down = refused_since
                        .is_some_and(|since| since.elapsed().saturating_add(pause) >= patience);
                    let settling = settle.is_some_and(|window| {
                        maybe_ran && !down && started.elapsed().saturating_add(pause) < window
                    });
                    let refused_here =
                        e.is_refused_connection() && crate::connection::refusal_ends_call();
                    if (n >= policy.retries || refused_here) && !settling {
                        return Err(e.naming(&self.inner.address));
                    }
                    n = n.saturating_add(1);
                    tracing::debug!(error = %e, retry = n, maybe_ran, "asking again after a connection error");
                    tokio::time::sleep(pause).await;
                }
                other => return other,
            }
        }
    }
}

/// What [`Client::shutdown_report`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Holds and permits whose guards were still alive, given back by the shutdown: each as
    /// its kind and key (``lock `orders` ``, ``2 semaphore permit(s) of `api` ``).
    pub given_back: Vec<String>,
    /// Those of them that Redis no longer had (their lease had run out, or Redis lost them):
    /// nothing to give back.
    pub already_gone: Vec<String>,
    /// Those that could not be given back, with why (Redis unreachable): a hold then ends
    /// with its lease, and a plain semaphore's permits stay taken.
    pub not_given_back: Vec<(String, String)>,
    /// Background releases, undos and queue exits still running when the shutdown stopped
    /// waiting (Redis unreachable): what they would have released ends with its lease.
    pub cleanups_pending: usize,
    /// Where the client connects, for the report's text.
    address: String,
}

impl ShutdownReport {
    /// Whether nothing was left: everything given back, every cleanup landed.
    pub fn is_complete(&self) -> bool {
        self.not_given_back.is_empty() && self.cleanups_pending == 0
    }
}

impl std::fmt::Display for ShutdownReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if !self.given_back.is_empty() {
            parts.push(format!(
                "gave back {} live hold(s): {}",
                self.given_back.len(),
                self.given_back.join(", ")
            ));
        }
        if !self.already_gone.is_empty() {
            parts.push(format!(
                "{} live hold(s) were gone from Redis already: {}",
                self.already_gone.len(),
                self.already_gone.join(", ")
            ));
        }
        if !self.not_given_back.is_empty() {
            let each: Vec<String> = self
                .not_given_back
                .iter()
                .map(|(what, why)| format!("{what} ({why})"))
                .collect();
            parts.push(format!(
                "could not give back {} live hold(s): {}; a lock ends with its lease, a plain semaphore's permits stay taken",
                each.len(),
                each.join(", ")
            ));
        }
        if self.cleanups_pending > 0 {
            parts.push(format!(
                "{} background release(s) or cleanup(s) still running (Redis at {} unreachable?); what they would have released ends with its lease",
                self.cleanups_pending, self.address
            ));
        }
        if parts.is_empty() {
            f.write_str("nothing was left")
        } else {
            f.write_str(&parts.join("; "))
        }
    }
}

/// The error a waiting call ends with when the client is shut down.
pub(crate) const SHUT_DOWN: Error = Error::Closed("the client was shut down");

/// An error from connecting to `address`, naming it: a malformed URL or setting as
/// [`Error::InvalidArgument`]; a server that answered but refused the client (credentials, a
/// database it does not have, ACL rights) as [`Error::Rejected`] or [`Error::NotPermitted`];
/// anything else as [`Error::Unreachable`].
fn connect_error(e: redis::RedisError, address: &str) -> Error {
    if let Some(refusal) = refusal(&e, address) {
        tracing::warn!(error = %e, address, "redis refused the client");
        return refusal;
    }
    match e.kind() {
        redis::ErrorKind::InvalidClientConfig => {
            Error::InvalidArgument(format!("connecting to {address}: {e}"))
        }
        _ => Error::Unreachable {
            address: address.to_owned(),
            source: e,
        },
    }
}

/// The refusal a server that answered gave the client at connect, if it was one: retrying
/// cannot help, and the network is not the cause.
fn refusal(e: &redis::RedisError, address: &str) -> Option<Error> {
    let text = e.to_string();
    if e.kind() == redis::ErrorKind::AuthenticationFailed
        || matches!(e.code(), Some("NOAUTH" | "WRONGPASS"))
    {
        return Some(Error::Rejected {
            address: address.to_owned(),
            reason: format!(
                "authentication failed ({text}): check the user name and password (redis://user:password@host:port), or that the ACL user exists and is on"
            ),
        });
    }
    if text.contains("refused to switch database") || text.contains("DB index is out of range") {
        let db = address
            .rsplit_once('/')
            .map(|(_, db)| db)
            .filter(|db| db.parse::<u64>().is_ok())
            .map_or_else(|| "asked for".to_owned(), |db| db.to_owned());
        return Some(Error::Rejected {
            address: address.to_owned(),
            reason: format!(
                "the server has no database {db} ({text}): its `databases` setting bounds the index in the URL's path (redis://host:port/<db>); a cluster has database 0 only"
            ),
        });
    }
    if e.code() == Some("NOPERM") {
        return Some(Error::NotPermitted(format!(
            "the ACL user at {address} lacks a right ferrisson needs ({text}): docs/deployment.md lists the ACL a client needs"
        )));
    }
    None
}
/// The settings of a multiplexed command connection.
fn manager_config(config: &ClientConfig) -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_response_timeout(Some(config.response_timeout))
        .set_connection_timeout(Some(config.connect_timeout))
        .set_number_of_retries(1)
        .set_max_delay(config.retry.backoff.max)
}

fn runtime_check() -> Result<()> {
    install_tls_provider();
    if tokio::runtime::Handle::try_current().is_err() {
        return Err(Error::Closed(
            "a client must be created inside a Tokio runtime",
        ));
    }
    Ok(())
}

/// With rustls, a process-wide crypto provider: redis-rs builds its rustls configuration with
/// the process default, and rustls panics when there is none (redis-rs enables no provider
/// of its own). The application's choice, when it made one first, stands; otherwise `ring`.
#[cfg(feature = "tls-rustls")]
fn install_tls_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race with another thread installing one is fine: one is installed.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

#[cfg(not(feature = "tls-rustls"))]
fn install_tls_provider() {}

/// Whether the cluster's servers have sharded pub/sub, asked as Redisson asks: `PUBSUB
/// SHARDNUMSUB` is known (Redis 7+) or not.
async fn supports_sharded_pubsub(conn: &Connection) -> Result<bool> {
    match conn.query(redis::cmd("PUBSUB").arg("SHARDNUMSUB")).await {
        Ok(_) => Ok(true),
        Err(e)
            if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError)
                || e.code() == Some("ERR") =>
        {
            tracing::debug!(error = %e, "no sharded pub/sub on this cluster");
            Ok(false)
        }
        Err(e) => Err(Error::Redis(e)),
    }
}

/// Checks that the user may run what every synchronizer needs, so that a missing ACL right is
/// one clear error at connect, not a failure half way through the first call:
///
/// - scripts: one `EVAL` of a script that returns at once, with the server's version
///   (`redis.REDIS_VERSION_NUM`, which servers before 7.0 lack: 0 then), which it returns;
/// - publishing on the synchronizers' channels: every release script publishes after it
///   changed the state, and Redis does not roll a script back when a command in it is
///   refused, so a user without `@pubsub` (or without channel access, the default for new
///   ACL users since Redis 7) would see a release fail after it had happened. One `PUBLISH` of
///   an empty message on a channel of the synchronizers' naming (`redisson_lock__channel:…`,
///   in the client's namespace), which no waiter listens to.
async fn check_rights(conn: &Connection, config: &ClientConfig, address: &str) -> Result<u32> {
    let eval = redis::cmd("EVAL")
        .arg("return redis.REDIS_VERSION_NUM or 0")
        .arg(0)
        .clone();
    let version = match conn.query(&eval).await {
        Ok(Value::Int(version)) => u32::try_from(version).unwrap_or(0),
        Ok(other) => {
            tracing::debug!(reply = ?other, "the server's version was not a number: taken as before 7.0");
            0
        }
        Err(e) => {
            return Err(if e.code() == Some("NOPERM") {
                Error::NotPermitted(format!(
                    "the ACL user at {address} may not run scripts ({e}): every synchronizer runs as Lua scripts; grant +@scripting (or +eval +evalsha +script|load), as docs/deployment.md lists"
                ))
            } else {
                Error::Redis(e)
            });
        }
    };
    let channel = crate::keys::prefixed(
        "redisson_lock__channel",
        &format!("{}ferrisson:connect-check", config.namespace()),
    );
    let probe = redis::cmd(config.publish_command().as_str())
        .arg(&channel)
        .arg("")
        .clone();
    match conn.query(&probe).await {
        Ok(_) => Ok(version),
        Err(e) if e.code() == Some("NOPERM") => Err(Error::NotPermitted(format!(
            "the ACL user at {address} may not {} on `{channel}` ({e}): ferrisson's scripts publish release messages on `redisson_*` channels; grant the user +@pubsub (or +{}) and channel access (&redisson_* or allchannels), alongside +@scripting and the keys it uses",
            config.publish_command().as_str().to_uppercase(),
            config.publish_command().as_str(),
        ))),
        Err(e) => Err(Error::Redis(e)),
    }
}
