//! The client: one command connection, one subscriber connection, one watchdog.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{FromRedisValue, Value};

use crate::batch::Batcher;
use crate::config::ClientConfig;
use crate::config::{PublishCommand, ShardedSubscription};
use crate::error::{Error, Result, map_redis_error};
use crate::keys::validate_name;
use crate::owner::Owner;
use crate::pubsub::{Claim, Hub, Source, Subscription, Tag, WakePolicy};
use crate::releasing::ReleaseMark;
use crate::replication::{Replication, Synced};
use crate::script::{Script, ScriptCall};
use crate::watchdog::{LeaseHandle, LeaseSpec, LeaseState, Watchdog};

/// The command connection, shaped so that cluster and sentinel deployments become more
/// variants here without any change in the synchronizer crates, which only ever call
/// [`Client::eval`] and [`Client::query`].
#[derive(Clone)]
pub(crate) enum Connection {
    /// One multiplexed connection to a standalone server, reconnecting by itself.
    Standalone(ConnectionManager),
    /// A Redis Cluster: commands are routed to the primary of their keys' slot.
    Cluster(redis::cluster_async::ClusterConnection),
    /// The primary of a Sentinel set-up, followed across failovers.
    Sentinel(Arc<crate::sentinel::SentinelPrimary>),
}

impl Connection {
    /// `EVALSHA`; on `NOSCRIPT` (a restarted or flushed server), `SCRIPT LOAD` and again.
    pub(crate) async fn eval(&self, call: &ScriptCall) -> redis::RedisResult<Value> {
        self.eval_if_wanted(call, || true).await
    }

    /// As [`eval`](Self::eval), but after `NOSCRIPT` the source is sent only if `wanted()`
    /// still says so: a call whose caller has gone is not resent (it did not run, and the
    /// caller's clean-up, sent meanwhile, may have run already: the resent call would run
    /// after it).
    pub(crate) async fn eval_if_wanted(
        &self,
        call: &ScriptCall,
        wanted: impl Fn() -> bool,
    ) -> redis::RedisResult<Value> {
        match self.query(call.command()).await {
            Err(e)
                if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
                    && wanted() =>
            {
                tracing::info!(
                    script = call.script().name(),
                    "the server lacks the script (restarted, failed over or flushed): sending it with EVAL"
                );
                crate::metrics::script_reloaded(call.script().name());
                self.query(&call.eval_command()).await
            }
            other => other,
        }
    }

    /// The first `count` commands of `pipe` in one round trip, on one connection, to the node
    /// serving `key`: a script and the `WAIT` behind it. Each reply is returned as it came
    /// (an error reply stays a value).
    pub(crate) async fn pipeline_at(
        &self,
        pipe: &redis::Pipeline,
        count: usize,
        key: &str,
    ) -> redis::RedisResult<Vec<Value>> {
        match self {
            Connection::Standalone(manager) => {
                let mut manager = manager.clone();
                manager.send_packed_commands(pipe, 0, count).await
            }
            Connection::Cluster(cluster) => {
                use redis::cluster_routing::{Route, SingleNodeRoutingInfo, SlotAddr};
                let route = Route::new(crate::keys::hash_slot(key), SlotAddr::Master);
                let mut cluster = cluster.clone();
                cluster
                    .route_pipeline(
                        pipe.clone(),
                        0,
                        count,
                        SingleNodeRoutingInfo::SpecificNode(route),
                    )
                    .await
            }
            Connection::Sentinel(primary) => primary.pipeline(pipe, count).await,
        }
    }

    /// Whether commands go to a Redis Cluster (whose scripts may only touch one slot).
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self, Connection::Cluster(_))
    }

    pub(crate) async fn query(&self, cmd: &redis::Cmd) -> redis::RedisResult<Value> {
        self.query_raw(cmd).await?.extract_error()
    }

    /// As [`query`](Self::query), but error replies nested in the reply stay values (a
    /// batch's replies, one per call): only an error reply as the whole reply is an `Err`.
    pub(crate) async fn query_raw(&self, cmd: &redis::Cmd) -> redis::RedisResult<Value> {
        match self {
            Connection::Standalone(manager) => {
                // The inherent method, not the boxed `ConnectionLike` one: one allocation and
                // one indirect call less per command.
                let mut manager = manager.clone();
                top_level_error(manager.send_packed_command(cmd).await?)
            }
            Connection::Cluster(cluster) => {
                let mut cluster = cluster.clone();
                top_level_error(
                    redis::aio::ConnectionLike::req_packed_command(&mut cluster, cmd).await?,
                )
            }
            Connection::Sentinel(primary) => primary.query(cmd).await,
        }
    }
}

/// A reply that is an error as an `Err`; the values nested in any other reply untouched.
pub(crate) fn top_level_error(value: Value) -> redis::RedisResult<Value> {
    match value {
        Value::ServerError(e) => Err(e.into()),
        other => Ok(other),
    }
}

/// How to open one more command connection to the same deployment (replica sync's lanes).
#[derive(Clone)]
pub(crate) enum Opener {
    Standalone(redis::Client, ConnectionManagerConfig),
    Cluster(Arc<dyn Fn() -> redis::cluster::ClusterClientBuilder + Send + Sync>),
    Sentinel(
        crate::config::SentinelSpec,
        ConnectionManagerConfig,
        Duration,
    ),
}

impl Opener {
    pub(crate) async fn open(&self) -> redis::RedisResult<Connection> {
        Ok(match self {
            Opener::Standalone(client, config) => Connection::Standalone(
                ConnectionManager::new_with_config(client.clone(), config.clone()).await?,
            ),
            Opener::Cluster(builder) => {
                Connection::Cluster(builder().build()?.get_async_connection().await?)
            }
            Opener::Sentinel(spec, config, timeout) => Connection::Sentinel(Arc::new(
                crate::sentinel::SentinelPrimary::connect(spec, config.clone(), *timeout).await?,
            )),
        })
    }
}

struct Inner {
    id: String,
    config: ClientConfig,
    conn: Connection,
    batcher: Batcher,
    replication: Arc<Replication>,
    hub: Hub,
    watchdog: Watchdog,
    releasing: Arc<crate::releasing::Releasing>,
    /// The request id of the client's own unlock latches ([`ClientEngine::client_latch`]).
    latch_id: crate::keys::RequestId,
    /// The last release sequence number handed out ([`ClientEngine::next_release_seq`]).
    release_seq: std::sync::atomic::AtomicU64,
    /// What [`Client::shutdown`] waits for: the cleanups of dropped guards and abandoned calls
    /// (releases, undos, queue exits), and the acquisitions in flight, which a shutdown ends.
    tasks: tokio_util::task::TaskTracker,
    /// Cancelled by [`Client::shutdown`]: new acquisitions are refused and waiting ones end.
    closing: tokio_util::sync::CancellationToken,
    /// Where the client connects (passwords hidden), for errors ([`Error::Unreachable`]).
    address: String,
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
    inner: Arc<Inner>,
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
    /// The hub, where local hand-offs are claimed, unless replica sync is on: a hand-off is an
    /// acquisition made by the releaser's script, and with replica sync every acquisition goes
    /// through its own synced call, which rolls back what the replicas did not get.
    fn hand_offs(&self) -> Option<&Hub> {
        (!self.inner.replication.enabled()).then_some(&self.inner.hub)
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
            let Connection::Sentinel(primary) = &conn else {
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
        let pong = conn.query(&redis::cmd("PING")).await.map_err(|e| {
            if matches!(
                e.code(),
                Some("NOAUTH") | Some("WRONGPASS") | Some("NOPERM")
            ) {
                tracing::warn!(error = %e, "redis refused the client's credentials");
            }
            connect_error(e, &address)
        })?;
        if !matches!(&pong, Value::SimpleString(s) if s == "PONG") {
            return Err(Error::Protocol(format!("PING answered {pong:?}")));
        }
        check_publish(&conn, &config).await?;
        let replication = Replication::start(config.get_replica_sync(), &conn, &opener)
            .await
            .map_err(|e| match e.kind() {
                redis::ErrorKind::InvalidClientConfig => Error::InvalidArgument(e.to_string()),
                _ => Error::Redis(e),
            })?;
        let replication = Arc::new(replication);
        let hub = Hub::start(
            source,
            config.connect_timeout,
            config.response_timeout,
            config.retry,
        );
        let watchdog = Watchdog::start(
            conn.clone(),
            replication.clone(),
            config.get_watchdog_period(),
            config.response_timeout,
        );
        let uuid = uuid::Uuid::new_v4();
        let id = uuid.hyphenated().to_string();
        tracing::debug!(client_id = %id, "client connected");
        Ok(Self {
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
                release_seq: std::sync::atomic::AtomicU64::new(0),
                tasks: tokio_util::task::TaskTracker::new(),
                closing: tokio_util::sync::CancellationToken::new(),
                address,
            }),
        })
    }

    /// Where the client connects: the URL without its password, a cluster's seed nodes, or a
    /// Sentinel set-up's sentinels and primary name.
    pub fn address(&self) -> &str {
        &self.inner.address
    }

    /// Shuts the client down before the process ends, so that nothing it was doing is lost:
    /// [`shutdown_timeout`](Self::shutdown_timeout) with the client's retry window (how long
    /// a release may take to settle through a lost reply).
    ///
    /// Call it last in `main`, after dropping or releasing guards and permits: their releases
    /// run in the background on the runtime, and a runtime that ends with `main` stops them
    /// half way, leaving a lock held for its whole lease (and a plain semaphore's permits
    /// taken for good).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = ferrisson_testkit::RedisServer::spawn();
    /// # let url = server.url();
    /// use ferrisson_core::Client;
    ///
    /// let client = Client::connect(&url).await?;
    /// // ... take locks and permits, drop their guards ...
    /// client.shutdown().await?; // the releases of dropped guards have all landed
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// Dropping the call stops only the waiting: the client stays shut, and the cleanups go
    /// on in the background while the runtime lives.
    ///
    /// # Errors
    ///
    /// As [`shutdown_timeout`](Self::shutdown_timeout).
    pub async fn shutdown(&self) -> Result<()> {
        self.shutdown_timeout(self.retry_window()).await
    }

    /// Shuts the client down, waiting at most `timeout`: it stops taking new work (every
    /// acquisition of every clone then fails with [`Error::Closed`], and calls still waiting
    /// end with it), waits for every release, undo and queue exit that dropped guards and
    /// abandoned calls left to the background, then stops the watchdog. Holds whose guards
    /// are still alive are no longer renewed: their loss signal fires
    /// ([`LossReason::ClientShutDown`](crate::LossReason::ClientShutDown)) and they end on the
    /// server with their lease. A second call waits again for what is still pending.
    ///
    /// Guards dropped later, while the runtime lives, still release in the background.
    ///
    /// # Cancel safety
    ///
    /// As [`shutdown`](Self::shutdown).
    ///
    /// # Errors
    ///
    /// [`Error::Unfinished`] saying what was left: cleanups still running after `timeout`
    /// (Redis unreachable: what they would have released ends with its lease), and holds
    /// whose guards were still alive.
    pub async fn shutdown_timeout(&self, timeout: Duration) -> Result<()> {
        let inner = &self.inner;
        inner.closing.cancel();
        // Waiters asleep on the subscriber connection look now, and end.
        inner.hub.wake_all();
        inner.tasks.close();
        let finished = tokio::time::timeout(timeout, inner.tasks.wait())
            .await
            .is_ok();
        let pending = if finished { 0 } else { inner.tasks.len() };
        let held = inner.watchdog.shut_down();
        tracing::debug!(pending, held, "client shut down");
        let mut left = Vec::new();
        if pending > 0 {
            left.push(format!(
                "{pending} background release(s) or cleanup(s) still running after {timeout:?} (Redis at {} unreachable?); what they would have released ends with its lease",
                inner.address
            ));
        }
        if held > 0 {
            left.push(format!(
                "{held} hold(s) still had a live guard: no longer renewed, they end with their lease"
            ));
        }
        if left.is_empty() {
            Ok(())
        } else {
            Err(Error::Unfinished(left.join("; ")))
        }
    }

    /// Whether [`shutdown`](Self::shutdown) was called (on this client or a clone).
    pub fn is_shut_down(&self) -> bool {
        self.inner.closing.is_cancelled()
    }

    /// The client id: a random UUID v4, the first part of every owner of this client.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The settings the client runs with.
    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    /// A new owner, distinct from every other: bind it to a handle (`owned_by`) for holds that
    /// re-enter, or that one task takes and another releases (see [`Owner`]).
    pub fn new_owner(&self) -> Owner {
        Owner::fresh(&self.inner.id)
    }

    /// Channels currently subscribed (or being subscribed) and waiters on them.
    pub fn waiter_stats(&self) -> (usize, usize) {
        self.inner.hub.stats()
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
        let mut maybe_ran = false;
        let mut n: u32 = 0;
        loop {
            match attempt(n).await {
                Err(e) if e.is_connection_error() => {
                    maybe_ran |= !e.is_refused_connection();
                    let pause = policy.backoff(n.saturating_add(1));
                    let settling = settle.is_some_and(|window| {
                        maybe_ran && started.elapsed().saturating_add(pause) < window
                    });
                    if n >= policy.retries && !settling {
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

/// What synchronizer crates need of a [`Client`] beyond what users touch: script calls that
/// settle lost replies, plain commands, pub/sub waiters and hand-off claims, leases with the
/// watchdog, key naming. Part of the [engine](crate::engine); users never need it.
#[allow(async_fn_in_trait)]
pub trait ClientEngine {
    /// The Redis key of the object the user named `name`: the namespace prefix, then `name`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when `name` is empty.
    fn object_key(&self, name: &str) -> Result<String>;

    /// On a cluster, checks that every key or channel in `related` hashes to the slot of
    /// `key`, as the synchronizer's scripts need (one script touches one slot); always `Ok` on
    /// a standalone or Sentinel client.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] naming the first one that does not.
    fn check_same_slot(&self, key: &str, related: &[&str]) -> Result<()>;

    /// As [`eval_once`](Self::eval_once), and with replica sync on (for a script that writes),
    /// `WAIT`s for the replicas in the same round trip: the second result says whether enough
    /// of them acknowledged ([`Error::NotReplicated`] when not, [`Error::Redis`] when the wait
    /// failed). With sync off, the second result is `Ok`.
    ///
    /// # Errors
    ///
    /// As [`eval_once`](Self::eval_once), for the script call itself.
    async fn eval_once_synced<T: FromRedisValue>(
        &self,
        call: &ScriptCall,
    ) -> Result<(T, Result<()>)>;

    /// Runs a script call once: `EVALSHA`, and `EVAL` of the source when the server answers
    /// `NOSCRIPT`.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] (naming the call's first key) when a key holds another type,
    /// [`Error::Redis`] for any other failure, transient or not.
    async fn eval_once<T: FromRedisValue>(&self, call: &ScriptCall) -> Result<T>;

    /// Runs a script call until its outcome is known ([`settle`](Self::settle)), then, with
    /// replica sync on and a script that writes, waits for the replicas (logging when they do
    /// not acknowledge: the change stands on the primary). Retried per
    /// the client's [`RetryPolicy`](crate::RetryPolicy) when the connection broke, and on for
    /// the retry window while a lost reply leaves it unknown whether the call ran. Only for
    /// scripts that are idempotent with the same arguments (latched by a request id, or
    /// carrying the state the client believes in).
    ///
    /// # Errors
    ///
    /// As [`eval_once`](Self::eval_once), once the outcome is known to be a failure or could
    /// not be learnt within the window.
    async fn eval<T: FromRedisValue>(&self, call: &ScriptCall) -> Result<T>;

    /// Runs a script call that only reads (or whose every run is as good as one: a `…/state`
    /// script), retried per the client's [`RetryPolicy`](crate::RetryPolicy) when the
    /// connection broke, and never settled past it: a read whose reply was lost changed
    /// nothing, so there is nothing to learn by asking on for the retry window.
    ///
    /// # Errors
    ///
    /// As [`eval_once`](Self::eval_once), once the retries are used up.
    async fn eval_read<T: FromRedisValue>(&self, call: &ScriptCall) -> Result<T>;

    /// As [`eval`](Self::eval), with the call made for each attempt: `call(n)` for attempt `n`
    /// (0 the first), so that a retry can tell the script it is one (a release that recorded
    /// nothing answers a retry differently).
    ///
    /// # Errors
    ///
    /// As [`eval`](Self::eval).
    async fn eval_each<T: FromRedisValue>(&self, call: impl FnMut(u32) -> ScriptCall) -> Result<T>;

    /// Sends a plain command, retrying when the connection broke. Only for idempotent commands.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] (naming the command's first argument) when the key holds another
    /// type, [`Error::Redis`] otherwise.
    async fn query<T: FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T>;

    /// Whether `key` exists (`EXISTS`): a lock is held, a semaphore or latch is set.
    ///
    /// # Errors
    ///
    /// [`Error::Redis`].
    async fn exists(&self, key: &str) -> Result<bool>;

    /// The time left before `key` expires (`PTTL`); `None` when it does not exist or has no
    /// expiry.
    ///
    /// # Errors
    ///
    /// [`Error::Redis`].
    async fn remaining_ttl(&self, key: &str) -> Result<Option<Duration>>;

    /// The count stored in field `field` of hash `key` (`HGET`), 0 when absent: how many times
    /// an owner holds a lock.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] when `key` is not a hash, [`Error::Redis`].
    async fn hash_count(&self, key: &str, field: &str) -> Result<u32>;

    /// Runs `attempt(n)` for n = 0, 1, … until it succeeds, fails with a non-transient error, or
    /// the client's retry policy is used up, for a call that changes state and whose outcome
    /// the caller must know: after a failure that may have
    /// come after the call reached Redis (a lost reply, a timeout, a reset; not a refused
    /// connection), it goes on asking past the retry policy, with the policy's longest pause,
    /// for as long as a request-id latch lasts ([`settle_window`](Self::settle_window)). The
    /// attempts must be idempotent: each one re-asks the same question (`n > 0` tells a retry),
    /// so the first reply that arrives says what happened.
    ///
    /// # Errors
    ///
    /// The last attempt's error: the call failed, or its outcome stayed unknown for the whole
    /// window (then the caller must undo whatever the call may have done).
    async fn settle<T, F, Fut>(&self, attempt: F) -> Result<T>
    where
        F: FnMut(u32) -> Fut,
        Fut: Future<Output = Result<T>>;

    /// How long [`settle`](Self::settle) keeps asking after a lost reply: the retry window
    /// (how long request-id latches last) less one response timeout, so that the last retry
    /// reaches Redis while the first call's latch still stands.
    fn settle_window(&self) -> Duration;

    /// Registers `channel` for the calling waiter on the client's one subscriber connection.
    /// The channel is subscribed on the first waiter and unsubscribed after the last one. A
    /// `tag` makes the waiter eligible for local hand-offs ([`claim_waiter`](Self::claim_waiter)).
    fn subscribe(&self, channel: &str, policy: WakePolicy, tag: Option<Tag>) -> Subscription;

    /// Registers a waiter on `channel` only if other local waiters already keep it subscribed
    /// and confirmed: then no message published from now on can be missed, and the caller can
    /// queue behind them without trying first. `tag` is called only when the waiter registers
    /// (a client with no waiters at all answers `None` at the cost of one atomic load).
    fn subscribe_if_confirmed(
        &self,
        channel: &str,
        tag: impl FnOnce() -> Option<Tag>,
    ) -> Option<Subscription>;

    /// Registers a waiter on `channel` if it is subscribed and confirmed on the live connection,
    /// with local waiters on it or lingering after the last one left: no message published
    /// from now on can be missed, but nobody need be ahead of the caller, which must try
    /// before it sleeps.
    fn subscribe_if_live(
        &self,
        channel: &str,
        policy: WakePolicy,
        tag: impl FnOnce() -> Option<Tag>,
    ) -> Option<Subscription>;

    /// Reserves the longest-waiting tagged local waiter of `channel` for a hand-off, unless
    /// `max_streak` hand-offs in a row have happened since the last public message.
    fn claim_waiter(&self, channel: &str, max_streak: u32) -> Option<Claim>;

    /// As [`claim_waiter`](Self::claim_waiter), for a lock, whose clients take turns: when the
    /// streak has run out while local waiters wait, the client's turn ends, and the caller,
    /// which then releases publicly, must report how many subscribers its release message
    /// reached ([`end_turn`](Self::end_turn)).
    fn claim_turn(&self, channel: &str, max_streak: u32) -> Option<Claim>;

    /// Registers a waiter (carrying `tag`) on `channel` behind a local waiter whose tag
    /// satisfies `behind` and whose last try was in vain, if there is one on the confirmed
    /// channel: the caller, which wants no more than that waiter, queues behind it without a
    /// try of its own.
    fn subscribe_behind(
        &self,
        channel: &str,
        tag: impl FnOnce() -> Option<Tag>,
        behind: &dyn Fn(&Tag) -> bool,
    ) -> Option<Subscription>;

    /// Wakes up to `n` local waiters of `channel` not woken yet: a try took what it wanted
    /// and saw `n` more left.
    fn wake_local(&self, channel: &str, n: usize);

    /// The turn-ending release after [`claim_turn`](Self::claim_turn) returned `None` is
    /// done; its message reached `subscribers` subscriber connections (0 when it published
    /// nothing or its outcome is a retry's). The client's waiters let as many releases pass
    /// as other clients are subscribed, so that each gets a turn before this client's next.
    fn end_turn(&self, channel: &str, subscribers: u64);

    /// Registers a hold with the client's watchdog.
    fn hold_lease(&self, spec: LeaseSpec) -> LeaseHandle;

    /// What the client knows locally about the holds of `owner` on `key`.
    fn lease_state(&self, script: &Script, key: &Arc<str>, owner: &Arc<str>) -> Option<LeaseState>;

    /// How long an unlock result is kept for a retried release: the retry window of a call.
    fn retry_window(&self) -> Duration;

    /// The client's own unlock latch under `prefix` (`<prefix>:<the client id in 32 hex
    /// digits>`): one key per client and lock, where a release that frees the lock records its
    /// [sequence number](Self::next_release_seq) for a retry to find.
    fn client_latch(&self, prefix: &str) -> String;

    /// A release sequence number: larger than every one this client handed out before.
    fn next_release_seq(&self) -> u64;

    /// Marks a release of `owner` on the lock `key` in flight until the mark is dropped:
    /// `owner`'s acquire tries wait for it ([`releases_settled`](Self::releases_settled)), and
    /// a release of `key` made meanwhile [overlaps](ReleaseMark::overlaps) it. Hold the mark
    /// for as long as the release may be sent again.
    fn release_started(&self, owner: &Owner, key: &Arc<str>) -> ReleaseMark;

    /// Waits until no release of `owner` is in flight: an acquire try must not run before a
    /// release of its owner that may be resent (the resend, finding the owner holding, would
    /// free the new hold).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    async fn releases_settled(&self, owner: &Owner);

    /// Runs `cleanup` in the background on the current Tokio runtime, as work that
    /// [`Client::shutdown`] waits for; returns false (nothing runs) outside a runtime.
    fn spawn_cleanup(&self, cleanup: impl Future<Output = ()> + Send + 'static) -> bool;

    /// An acquisition starts: [`Error::Closed`] once the client is shut down; otherwise a mark
    /// that [`Client::shutdown`] waits for until it is dropped (the acquisition has ended, and
    /// whatever it left to clean up is spawned).
    ///
    /// # Errors
    ///
    /// [`Error::Closed`].
    fn begin_acquisition(&self) -> Result<InFlight>;

    /// Resolves once the client is shut down: a waiting call stops waiting then.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    fn shut_down(&self) -> tokio_util::sync::WaitForCancellationFuture<'_>;
}

/// An acquisition in flight, which [`Client::shutdown`] waits for until it is dropped
/// ([`ClientEngine::begin_acquisition`]).
#[derive(Debug)]
pub struct InFlight {
    _token: tokio_util::task::task_tracker::TaskTrackerToken,
}

/// The error a waiting call ends with when the client is shut down.
pub(crate) const SHUT_DOWN: Error = Error::Closed("the client was shut down");

/// A connection error from connecting to `address`, naming it ([`Error::Unreachable`]); a
/// malformed URL or setting as [`Error::InvalidArgument`].
fn connect_error(e: redis::RedisError, address: &str) -> Error {
    match e.kind() {
        redis::ErrorKind::InvalidClientConfig => {
            Error::InvalidArgument(format!("connecting to {address}: {e}"))
        }
        // An ACL refusal at connect is not about reaching the server.
        _ if e.code() == Some("NOPERM") => Error::Redis(e),
        _ => Error::Unreachable {
            address: address.to_owned(),
            source: e,
        },
    }
}

/// The settings of a multiplexed command connection.
fn manager_config(config: &ClientConfig) -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_response_timeout(Some(config.response_timeout))
        .set_connection_timeout(Some(config.connect_timeout))
        .set_number_of_retries(1)
        .set_max_delay(config.retry.max_backoff)
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

/// Checks that the user may publish on the synchronizers' channels: every release script
/// publishes after it changed the state, and Redis does not roll a script back when a command
/// in it is refused, so a user without `@pubsub` (or without channel access, the default for
/// new ACL users since Redis 7) would see a release fail after it had happened. One `PUBLISH`
/// of an empty message on a channel of the synchronizers' naming (`redisson_lock__channel:…`,
/// in the client's namespace), which no waiter listens to.
async fn check_publish(conn: &Connection, config: &ClientConfig) -> Result<()> {
    let channel = crate::keys::prefixed(
        "redisson_lock__channel",
        &format!("{}ferrisson:connect-check", config.get_namespace()),
    );
    let probe = redis::cmd(config.get_publish_command().as_str())
        .arg(&channel)
        .arg("")
        .clone();
    match conn.query(&probe).await {
        Ok(_) => Ok(()),
        Err(e) if e.code() == Some("NOPERM") => Err(Error::NotPermitted(format!(
            "the Redis user may not {} on `{channel}` ({e}): ferrisson's scripts publish release messages on `redisson_*` channels; grant the user +@pubsub (or +{}) and channel access (&redisson_* or allchannels), alongside +@scripting and the keys it uses",
            config.get_publish_command().as_str().to_uppercase(),
            config.get_publish_command().as_str(),
        ))),
        Err(e) => Err(Error::Redis(e)),
    }
}

impl ClientEngine for Client {
    fn object_key(&self, name: &str) -> Result<String> {
        validate_name(name)?;
        let key = format!("{}{name}", self.inner.config.namespace);
        if self.inner.conn.is_cluster() {
            crate::keys::validate_cluster_name(&key)?;
        }
        Ok(key)
    }

    async fn eval_once_synced<T: FromRedisValue>(
        &self,
        call: &ScriptCall,
    ) -> Result<(T, Result<()>)> {
        let replication = &self.inner.replication;
        if !replication.enabled() || !call.script().writes() || crate::replication::rolling_back() {
            return Ok((self.eval_once(call).await?, Ok(())));
        }
        let (value, synced) = replication
            .eval_synced(call)
            .await
            .map_err(|e| script_error(e, call))?;
        let value = redis::from_redis_value(value)
            .map_err(|e| Error::Protocol(format!("{}: {e}", call.script().name())))?;
        let key = call.keys().next().unwrap_or_default();
        let synced = match synced {
            Ok(Synced::NotNeeded | Synced::Yes) => Ok(()),
            Ok(Synced::No { acked, wanted }) => {
                tracing::debug!(%key, acked, wanted, "replicas did not acknowledge the change in time");
                Err(Error::NotReplicated { acked, wanted })
            }
            Err(e) => Err(Error::Redis(e)),
        };
        Ok((value, synced))
    }

    fn check_same_slot(&self, key: &str, related: &[&str]) -> Result<()> {
        if !self.inner.conn.is_cluster() {
            return Ok(());
        }
        let slot = crate::keys::hash_slot(key);
        match related.iter().find(|r| crate::keys::hash_slot(r) != slot) {
            Some(other) => Err(Error::InvalidArgument(format!(
                "on a Redis Cluster, `{other}` (named by the shared protocol after `{key}`) lands in another slot than `{key}`: use a name without braces for this synchronizer"
            ))),
            None => Ok(()),
        }
    }

    async fn eval_once<T: FromRedisValue>(&self, call: &ScriptCall) -> Result<T> {
        let value = self
            .inner
            .batcher
            .eval(call)
            .await
            .map_err(|e| script_error(e, call))?;
        redis::from_redis_value(value)
            .map_err(|e| Error::Protocol(format!("{}: {e}", call.script().name())))
    }

    async fn eval<T: FromRedisValue>(&self, call: &ScriptCall) -> Result<T> {
        let (reply, synced) = self.settle(|_| self.eval_once_synced(call)).await?;
        warn_unsynced(call, synced);
        Ok(reply)
    }

    async fn eval_read<T: FromRedisValue>(&self, call: &ScriptCall) -> Result<T> {
        self.retry_loop(|_| self.eval_once(call), None).await
    }

    async fn eval_each<T: FromRedisValue>(
        &self,
        mut call: impl FnMut(u32) -> ScriptCall,
    ) -> Result<T> {
        let (reply, synced, call) = self
            .settle(|n| {
                let call = call(n);
                async move {
                    let (reply, synced) = self.eval_once_synced(&call).await?;
                    Ok((reply, synced, call))
                }
            })
            .await?;
        warn_unsynced(&call, synced);
        Ok(reply)
    }

    async fn query<T: FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T> {
        self.retry_loop(
            |_| async {
                let value = self.inner.conn.query(cmd).await.map_err(|e| {
                    // The key is the command's first argument (`EXISTS key`, `HGET key field`).
                    let key = cmd
                        .args_iter()
                        .nth(1)
                        .and_then(|a| match a {
                            redis::Arg::Simple(bytes) => std::str::from_utf8(bytes).ok(),
                            _ => None,
                        })
                        .unwrap_or_default();
                    map_redis_error(e, key)
                })?;
                redis::from_redis_value(value).map_err(|e| Error::Protocol(e.to_string()))
            },
            None,
        )
        .await
    }

    async fn exists(&self, key: &str) -> Result<bool> {
        let exists: i64 = self.query(redis::cmd("EXISTS").arg(key)).await?;
        Ok(exists == 1)
    }

    async fn remaining_ttl(&self, key: &str) -> Result<Option<Duration>> {
        let ttl: i64 = self.query(redis::cmd("PTTL").arg(key)).await?;
        Ok(u64::try_from(ttl).ok().map(Duration::from_millis))
    }

    async fn hash_count(&self, key: &str, field: &str) -> Result<u32> {
        let count: Option<u32> = self.query(redis::cmd("HGET").arg(key).arg(field)).await?;
        Ok(count.unwrap_or(0))
    }

    async fn settle<T, F, Fut>(&self, attempt: F) -> Result<T>
    where
        F: FnMut(u32) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        self.retry_loop(attempt, Some(self.settle_window())).await
    }

    fn settle_window(&self) -> Duration {
        self.retry_window()
            .saturating_sub(self.inner.config.response_timeout)
    }

    fn subscribe(&self, channel: &str, policy: WakePolicy, tag: Option<Tag>) -> Subscription {
        self.inner.hub.subscribe(channel, policy, tag)
    }

    fn subscribe_if_confirmed(
        &self,
        channel: &str,
        tag: impl FnOnce() -> Option<Tag>,
    ) -> Option<Subscription> {
        self.inner.hub.subscribe_if_confirmed(channel, tag)
    }

    fn subscribe_if_live(
        &self,
        channel: &str,
        policy: WakePolicy,
        tag: impl FnOnce() -> Option<Tag>,
    ) -> Option<Subscription> {
        self.inner.hub.subscribe_if_live(channel, policy, tag)
    }

    fn claim_waiter(&self, channel: &str, max_streak: u32) -> Option<Claim> {
        self.hand_offs()
            .and_then(|hub| hub.claim(channel, max_streak))
    }

    fn claim_turn(&self, channel: &str, max_streak: u32) -> Option<Claim> {
        self.hand_offs()
            .and_then(|hub| hub.claim_turn(channel, max_streak))
    }

    fn end_turn(&self, channel: &str, subscribers: u64) {
        self.inner.hub.end_turn(channel, subscribers);
    }

    fn subscribe_behind(
        &self,
        channel: &str,
        tag: impl FnOnce() -> Option<Tag>,
        behind: &dyn Fn(&Tag) -> bool,
    ) -> Option<Subscription> {
        self.inner.hub.subscribe_behind(channel, tag, behind)
    }

    fn wake_local(&self, channel: &str, n: usize) {
        self.inner.hub.wake_local(channel, n);
    }

    fn hold_lease(&self, spec: LeaseSpec) -> LeaseHandle {
        self.inner.watchdog.hold(spec)
    }

    fn lease_state(&self, script: &Script, key: &Arc<str>, owner: &Arc<str>) -> Option<LeaseState> {
        self.inner.watchdog.state(script, key, owner)
    }

    fn retry_window(&self) -> Duration {
        let config = &self.inner.config;
        config.retry.window(config.response_timeout)
    }

    fn client_latch(&self, prefix: &str) -> String {
        self.inner.latch_id.latch_key(prefix)
    }

    fn next_release_seq(&self) -> u64 {
        use std::sync::atomic::Ordering;
        self.inner.release_seq.fetch_add(1, Ordering::Relaxed) + 1
    }

    fn release_started(&self, owner: &Owner, key: &Arc<str>) -> ReleaseMark {
        self.inner.releasing.start(owner, key)
    }

    async fn releases_settled(&self, owner: &Owner) {
        self.inner.releasing.settled(owner).await;
    }

    fn spawn_cleanup(&self, cleanup: impl Future<Output = ()> + Send + 'static) -> bool {
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                self.inner.tasks.spawn_on(cleanup, &runtime);
                true
            }
            Err(_) => false,
        }
    }

    fn begin_acquisition(&self) -> Result<InFlight> {
        if self.inner.closing.is_cancelled() {
            return Err(SHUT_DOWN);
        }
        Ok(InFlight {
            _token: self.inner.tasks.token(),
        })
    }

    fn shut_down(&self) -> tokio_util::sync::WaitForCancellationFuture<'_> {
        self.inner.closing.cancelled()
    }
}

/// Releases and other changes are done on the primary whatever the replicas say; a failover
/// before they have one may undo it (a released hold comes back until its lease ends, and is
/// no longer renewed): said once, here.
fn warn_unsynced(call: &ScriptCall, synced: Result<()>) {
    if let Err(e) = synced {
        let key = call.keys().next().unwrap_or_default();
        tracing::warn!(script = call.script().name(), %key, error = %e, "a change the replicas did not acknowledge: a failover now could undo it");
    }
}

fn script_error(e: redis::RedisError, call: &ScriptCall) -> Error {
    map_redis_error(e, call.keys().next().unwrap_or_default())
}
