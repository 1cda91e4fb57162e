//! The command connection (standalone, cluster or sentinel) and how to open another one.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use redis::Value;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::error::top_level_error;
use crate::script::{Script, ScriptCall};

/// The command connection: the link to the deployment, and what the server is known to lack.
///
/// Scripts are loaded on every (re)connect, before the first call on it: a connection
/// starts [stale](Scripts::stale), and becomes stale again when a command on it fails in a way
/// that may mean the link was lost (the connection then reconnects, possibly to a restarted
/// or failed-over server, which has no scripts) or when a call meets `NOSCRIPT` anyway (a
/// `SCRIPT FLUSH`, a reconnect the client did not see). The next script call on a stale
/// connection goes out right behind `SCRIPT LOAD` of every script this process has sent
/// ([`crate::script::sent_sources`]), in the same write: no call waits for a load, so calls
/// reach Redis in the order they were made, and the loads cost no round trip of their own.
/// On a cluster the loads go to every node apart from the call, and are waited for; calls made
/// meanwhile wait for them too rather than overtake them. `NOSCRIPT`, answered by `EVAL`,
/// stays the fallback (a `SCRIPT FLUSH`, a node the client did not know of).
#[derive(Clone)]
pub(crate) struct Connection {
    link: Link,
    scripts: Arc<Scripts>,
    /// Whether, and for which subscriber, tracked calls arm invalidations
    /// ([`crate::tracking`]): the client's, shared with its hub and its other connections.
    tracking: Arc<crate::tracking::Tracking>,
    /// The subscriber this connection's tracking points at (0: not known on: never armed, or
    /// the link may have been lost since, and the server with it).
    armed_for: Arc<std::sync::atomic::AtomicU64>,
}

/// The link under a [`Connection`], shaped so that cluster and sentinel deployments become
/// more variants here without any change in the synchronizer crates, which only ever call
/// [`Client::eval`] and [`Client::query`].
#[derive(Clone)]
pub(crate) enum Link {
    /// One multiplexed connection to a standalone server, reconnecting by itself.
    Standalone(ConnectionManager),
    /// A Redis Cluster: commands are routed to the primary of their keys' slot.
    Cluster(redis::cluster_async::ClusterConnection),
    /// The primary of a Sentinel set-up, followed across failovers.
    Sentinel(Arc<crate::sentinel::SentinelPrimary>),
}

/// A server to send a keyless command to ([`Connection::query_node`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Node {
    /// The connection's own server (standalone, Sentinel's primary).
    Default,
    /// A cluster node by address.
    At { host: String, port: u16 },
}

/// Whether a connection's server may lack scripts.
struct Scripts {
    /// Set at the start and after a failure that may have been a lost link: the next script
    /// call loads every sent script first.
    stale: AtomicBool,
    /// How many of the scripts this process has sent ([`crate::script::sent_count`]) the
    /// server was given since the connection was last stale: a script first sent later is
    /// loaded before its first call too.
    loaded: AtomicUsize,
    /// Set when the server refused a load outright (no `SCRIPT LOAD` right): the connection
    /// relies on the `NOSCRIPT` fallback from then on.
    refused: AtomicBool,
    /// A cluster's loads, one caller at a time ([`Connection::loads_before`]).
    cluster_load: tokio::sync::Mutex<()>,
    /// A cluster's loads are on their way: script calls wait for them (they have marked the
    /// scripts loaded already, and a call let through could overtake them on its node).
    cluster_loading: AtomicBool,
}

impl Connection {
    pub(crate) fn new(link: Link) -> Self {
        // A cluster is never armed: a redirect must name a connection on the key's own node.
        let tracking = crate::tracking::Tracking::new(!matches!(link, Link::Cluster(_)));
        Self {
            tracking: Arc::new(tracking),
            armed_for: Arc::default(),
            link,
            scripts: Arc::new(Scripts {
                stale: AtomicBool::new(true),
                loaded: AtomicUsize::new(0),
                refused: AtomicBool::new(false),
                cluster_load: tokio::sync::Mutex::new(()),
                cluster_loading: AtomicBool::new(false),
            }),
        }
    }

    /// The client's tracking state, which the hub's subscriber connection feeds.
    pub(crate) fn tracking(&self) -> &Arc<crate::tracking::Tracking> {
        &self.tracking
    }

    /// This connection, arming with the client's tracking `tracking` (another command
    /// connection of the client: a replica sync lane).
    pub(crate) fn tracking_with(mut self, tracking: &Arc<crate::tracking::Tracking>) -> Self {
        self.tracking = tracking.clone();
        self
    }

    /// The followed primary, on a Sentinel set-up.
    pub(crate) fn sentinel(&self) -> Option<&Arc<crate::sentinel::SentinelPrimary>> {
        match &self.link {
            Link::Sentinel(primary) => Some(primary),
            _ => None,
        }
    }

    /// Notes that `script` (its batch form when `batch` is set) is about to be sent, and says
    /// which sources the server must be given first: every script sent so far when it may lack
    /// them (the connection is stale), else those first sent since the last load, usually
    /// none. The caller sends them right before its call ([`query_loaded`](Self::query_loaded)).
    fn loads_for(&self, script: &'static Script, batch: bool) -> Vec<&'static str> {
        script.note_sent(batch);
        if self.scripts.refused.load(Ordering::Relaxed) {
            return Vec::new();
        }
        let count = crate::script::sent_count();
        if !self.scripts.stale.load(Ordering::Acquire)
            && self.scripts.loaded.load(Ordering::Acquire) >= count
        {
            return Vec::new();
        }
        let from = if self.scripts.stale.swap(false, Ordering::AcqRel) {
            0
        } else {
            self.scripts.loaded.load(Ordering::Acquire)
        };
        let sources = crate::script::sent_sources(from);
        self.scripts
            .loaded
            .fetch_max(from + sources.len(), Ordering::AcqRel);
        sources
    }

    /// As [`loads_for`](Self::loads_for), the loads to send in the call's own pipeline
    /// ([`query_loaded`](Self::query_loaded), [`pipeline_loaded`](Self::pipeline_loaded)); on
    /// a cluster, whose loads go to every node apart from the call, they are sent and waited
    /// for here instead, and none is left for the call. Callers may leave, and calls may run
    /// out of time, meanwhile: a caller checks before it sends.
    pub(crate) async fn loads_before(
        &self,
        script: &'static Script,
        batch: bool,
    ) -> Vec<&'static str> {
        if self.is_cluster() {
            script.note_sent(batch);
            let up_to_date = !self.scripts.stale.load(Ordering::Acquire)
                && self.scripts.loaded.load(Ordering::Acquire) >= crate::script::sent_count()
                && !self.scripts.cluster_loading.load(Ordering::Acquire);
            if up_to_date || self.scripts.refused.load(Ordering::Relaxed) {
                return Vec::new();
            }
            // Behind any load on its way, then the loads still missing, if any.
            let _one = self.scripts.cluster_load.lock().await;
            let _loading = ClusterLoading::new(&self.scripts.cluster_loading);
            let loads = self.loads_for(script, batch);
            self.await_loads(loads).await;
            return Vec::new();
        }
        self.loads_for(script, batch)
    }

    /// `cmd` (`raw`: answered as [`query_raw`](Self::query_raw) does, else as
    /// [`query`](Self::query)) right behind `SCRIPT LOAD` of each of `sources`
    /// ([`loads_before`](Self::loads_before)), in one pipeline
    /// ([`pipeline_loaded`](Self::pipeline_loaded)).
    pub(crate) async fn query_loaded(
        &self,
        sources: Vec<&'static str>,
        cmd: &redis::Cmd,
        raw: bool,
    ) -> redis::RedisResult<Value> {
        if sources.is_empty() {
            return if raw {
                self.query_raw(cmd).await
            } else {
                self.query(cmd).await
            };
        }
        let reply = self
            .pipeline_loaded(&sources, &[cmd], "")
            .await?
            .pop()
            .ok_or_else(|| {
                redis::RedisError::from((
                    redis::ErrorKind::UnexpectedReturnType,
                    "a pipeline of script loads and a call came back short",
                ))
            })?;
        if raw {
            top_level_error(reply)
        } else {
            reply.extract_error()
        }
    }

    /// `cmds` right behind `SCRIPT LOAD` of each of `sources`, in one pipeline on one
    /// connection to the node serving `key` ([`pipeline_at`](Self::pipeline_at)): the server
    /// runs the loads first, and the loads cost no round trip of their own. Returns the
    /// replies to `cmds`, each as it came. A load the server refuses outright (`NOPERM`, or
    /// `ERR` from a server without the command) stops the loading for good; one that fails
    /// otherwise leaves the connection stale, so the next call loads again.
    pub(crate) async fn pipeline_loaded(
        &self,
        sources: &[&'static str],
        cmds: &[&redis::Cmd],
        key: &str,
    ) -> redis::RedisResult<Vec<Value>> {
        let mut pipe = load_pipeline(sources);
        for cmd in cmds {
            pipe.add_command((*cmd).clone());
        }
        let replies = self
            .pipeline_at(&pipe, sources.len() + cmds.len(), key)
            .await?;
        let (failed, rest) = split_loads(replies, sources.len());
        if !sources.is_empty() {
            self.loaded(sources.len(), failed);
        }
        Ok(rest)
    }

    /// `SCRIPT LOAD` of each of `sources` (on a cluster, to every node), waited for.
    async fn await_loads(&self, sources: Vec<&'static str>) {
        if sources.is_empty() {
            return;
        }
        let count = sources.len();
        // Boxed: the loads' future (every link's command future) stays out of the type of
        // every call's future.
        let loads: futures::future::BoxFuture<'_, Option<redis::RedisError>> =
            Box::pin(self.load(sources));
        let failed = loads.await;
        self.loaded(count, failed);
    }

    /// Notes how a load of `count` scripts went ([`query_loaded`](Self::query_loaded)).
    fn loaded(&self, count: usize, failed: Option<redis::RedisError>) {
        match failed {
            None => {
                tracing::debug!(
                    scripts = count,
                    "scripts loaded on the (re)connected server"
                );
                crate::metrics::scripts_loaded(count);
            }
            Some(e) if matches!(e.code(), Some("NOPERM" | "ERR")) => {
                // Refused, not lost (a user without the `SCRIPT LOAD` right, a server that
                // lacks the command): asking again would cost every (re)connect a refusal.
                // (A server still loading its data answers `LOADING`, and is asked again.)
                self.scripts.refused.store(true, Ordering::Relaxed);
                tracing::warn!(error = %e, "the server refused SCRIPT LOAD: scripts are sent with EVAL when the server lacks them (grant +script|load, docs/deployment.md)");
            }
            Some(e) => {
                // `query_raw` has marked the connection stale: the next call loads again.
                tracing::debug!(error = %e, "loading the scripts failed; the next call tries again");
            }
        }
    }

    /// `SCRIPT LOAD` of each of `sources` (on a cluster, to every node), handed to the
    /// connection in order: the first error, if any.
    async fn load(&self, sources: Vec<&'static str>) -> Option<redis::RedisError> {
        let loads = sources.into_iter().map(|source| async move {
            let mut cmd = redis::cmd("SCRIPT");
            cmd.arg("LOAD").arg(source);
            self.query_raw(&cmd).await
        });
        futures::future::join_all(loads)
            .await
            .into_iter()
            .find_map(Result::err)
    }

    /// Marks the server as possibly lacking scripts when `result` failed in a way that may
    /// mean a lost link, or a reply said `NOSCRIPT`.
    fn observe<T>(&self, result: &redis::RedisResult<T>) {
        if let Err(e) = result {
            let lost = e.is_io_error()
                || e.is_connection_dropped()
                || e.is_connection_refusal()
                || e.is_timeout();
            if lost {
                // A reconnected link has no tracking either.
                self.armed_for.store(0, Ordering::Release);
            }
            if lost || e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) {
                self.mark_stale();
            }
        }
    }

    /// The server may lack scripts: the next script call loads them first.
    pub(crate) fn mark_stale(&self) {
        self.scripts.stale.store(true, Ordering::Release);
    }

    /// `EVALSHA`; on `NOSCRIPT` (a restarted or flushed server), `SCRIPT LOAD` and again.
    pub(crate) async fn eval(&self, call: &ScriptCall) -> redis::RedisResult<Value> {
        self.eval_if_wanted(call, || true, send_by()).await
    }

    /// As [`eval`](Self::eval), but after `NOSCRIPT` the call is sent again only if `wanted()`
    /// still says so: a call whose caller has gone is not resent (it did not run, and the
    /// caller's clean-up, sent meanwhile, may have run already: the call would run after it).
    /// Nor is it sent after `by` ([`sending_by`]).
    pub(crate) async fn eval_if_wanted(
        &self,
        call: &ScriptCall,
        wanted: impl Fn() -> bool,
        by: Option<tokio::time::Instant>,
    ) -> redis::RedisResult<Value> {
        let loads = if call.is_plain() {
            Vec::new()
        } else {
            self.loads_before(call.script(), false).await
        };
        in_time(by)?;
        if !wanted() {
            return Err(caller_gone());
        }
        match self.send_call(loads, call).await {
            Err(e)
                if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
                    && wanted() =>
            {
                in_time(by)?;
                tracing::info!(
                    script = call.script().name(),
                    "the server lacks the script (restarted, failed over or flushed): sending it with EVAL"
                );
                crate::metrics::script_reloaded(call.script().name());
                // Sent alone: its reads are not tracked (its waiter re-checks sooner).
                call.set_armed(false);
                self.query(&call.eval_command()).await
            }
            other => other,
        }
    }

    /// `call` right behind `SCRIPT LOAD` of each of `sources`; a tracked call
    /// ([`ScriptCall::tracked`]) also behind the commands that arm tracking for its reads, when
    /// the connection can ([`crate::tracking`]), all in one pipeline.
    async fn send_call(
        &self,
        sources: Vec<&'static str>,
        call: &ScriptCall,
    ) -> redis::RedisResult<Value> {
        if call.armed().is_none() {
            return self.query_loaded(sources, call.command(), false).await;
        }
        self.pipeline_call(&sources, call, &[], "")
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| {
                redis::RedisError::from((
                    redis::ErrorKind::UnexpectedReturnType,
                    "a pipeline of a tracked call came back short",
                ))
            })?
            .extract_error()
    }

    /// `call` and `after` right behind `SCRIPT LOAD` of each of `sources`, in one pipeline
    /// ([`pipeline_loaded`](Self::pipeline_loaded)); a tracked call ([`ScriptCall::tracked`])
    /// also behind the commands that arm tracking for its reads, when the connection can
    /// ([`crate::tracking`]). The replies to `call` and `after`.
    pub(crate) async fn pipeline_call(
        &self,
        sources: &[&'static str],
        call: &ScriptCall,
        after: &[&redis::Cmd],
        key: &str,
    ) -> redis::RedisResult<Vec<Value>> {
        let armed_for = self.armed_for.load(Ordering::Acquire);
        let arming = call.armed().and_then(|_| self.tracking.arming(armed_for));
        let arms: &[redis::Cmd] = arming.as_ref().map_or(&[], |a| a.cmds.as_slice());
        let all: Vec<&redis::Cmd> = arms
            .iter()
            .chain(std::iter::once(call.command()))
            .chain(after.iter().copied())
            .collect();
        let mut replies = self.pipeline_loaded(sources, &all, key).await?;
        let rest = replies.split_off(arms.len().min(replies.len()));
        if let Some(arming) = &arming {
            call.set_armed(self.tracking.armed(arming, &replies, &self.armed_for));
        }
        Ok(rest)
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
        let result = match &self.link {
            Link::Standalone(manager) => {
                let mut manager = manager.clone();
                manager.send_packed_commands(pipe, 0, count).await
            }
            Link::Cluster(cluster) => {
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
            Link::Sentinel(primary) => primary.pipeline(pipe, count).await,
        };
        self.observe(&result);
        if let Ok(replies) = &result
            && replies
                .iter()
                .any(|r| matches!(r, Value::ServerError(e) if e.code() == "NOSCRIPT"))
        {
            self.mark_stale();
        }
        result
    }

    /// The servers a scan of every key must visit: the one server, or every primary of a
    /// cluster (from `CLUSTER SLOTS`).
    pub(crate) async fn scan_nodes(&self) -> redis::RedisResult<Vec<Node>> {
        if !self.is_cluster() {
            return Ok(vec![Node::Default]);
        }
        let slots = self
            .query(&redis::cmd("CLUSTER").arg("SLOTS").clone())
            .await?;
        let ranges: Vec<Vec<Value>> = redis::from_redis_value(slots)?;
        let mut nodes = Vec::new();
        for range in ranges {
            // [start, end, [host, port, id, …] of the primary, replicas…]
            let Some(primary) = range.get(2) else {
                continue;
            };
            let primary: Vec<Value> = redis::from_redis_value_ref(primary)?;
            let (Some(host), Some(port)) = (primary.first(), primary.get(1)) else {
                continue;
            };
            let node = Node::At {
                host: redis::from_redis_value_ref(host)?,
                port: redis::from_redis_value_ref(port)?,
            };
            if !nodes.contains(&node) {
                nodes.push(node);
            }
        }
        Ok(nodes)
    }

    /// `cmd` on `node` (a command with no key: `SCAN`).
    pub(crate) async fn query_node(
        &self,
        cmd: &redis::Cmd,
        node: &Node,
    ) -> redis::RedisResult<Value> {
        match (&self.link, node) {
            (Link::Cluster(cluster), Node::At { host, port }) => {
                use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
                let mut cluster = cluster.clone();
                let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                    host: host.clone(),
                    port: *port,
                });
                let result = cluster.route_command(cmd.clone(), routing).await;
                self.observe(&result);
                result.and_then(top_level_error)
            }
            _ => self.query(cmd).await,
        }
    }

    /// Whether commands go to a Redis Cluster (whose scripts may only touch one slot).
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self.link, Link::Cluster(_))
    }

    pub(crate) async fn query(&self, cmd: &redis::Cmd) -> redis::RedisResult<Value> {
        self.query_raw(cmd).await?.extract_error()
    }

    /// As [`query`](Self::query), but error replies nested in the reply stay values (a
    /// batch's replies, one per call): only an error reply as the whole reply is an `Err`.
    pub(crate) async fn query_raw(&self, cmd: &redis::Cmd) -> redis::RedisResult<Value> {
        let result = match &self.link {
            Link::Standalone(manager) => {
                // The inherent method, not the boxed `ConnectionLike` one: one allocation and
                // one indirect call less per command.
                let mut manager = manager.clone();
                manager
                    .send_packed_command(cmd)
                    .await
                    .and_then(top_level_error)
            }
            Link::Cluster(cluster) => {
                let mut cluster = cluster.clone();
                top_level_error(
                    redis::aio::ConnectionLike::req_packed_command(&mut cluster, cmd).await?,
                )
            }
            Link::Sentinel(primary) => primary.query(cmd).await,
        };
        self.observe(&result);
        result
    }
}

tokio::task_local! {
    /// The latest moment a call that changes state may still be sent, for the calls of a task
    /// inside [`sending_by`]: the settle loop's attempts (`Client::settle`) carry it, so that
    /// no attempt reaches Redis after the records that resolve a lost reply may have expired,
    /// however long a wait for the scripts to load held it up.
    static SEND_BY: tokio::time::Instant;
}

tokio::task_local! {
    /// Set for the calls of a task inside [`refusal_ends_calls`]: a refused connection ends a
    /// call at once instead of being asked again.
    static REFUSAL_ENDS_CALLS: ();
}

/// Runs `calls`, whose calls end at once with their error when their server refuses the
/// connection (it is down) instead of being asked again with the retry policy's pauses: for a
/// caller whose own rounds are the retry and which must not wait for one server while it
/// holds others (a RedLock's instance tries). A refused connection never ran the call, so no
/// outcome is left unknown by the refusal itself.
pub async fn refusal_ends_calls<F: std::future::Future>(calls: F) -> F::Output {
    REFUSAL_ENDS_CALLS.scope((), calls).await
}

/// Whether the current task's calls end at a refused connection ([`refusal_ends_calls`]).
pub(crate) fn refusal_ends_call() -> bool {
    REFUSAL_ENDS_CALLS.try_with(|()| ()).is_ok()
}

/// Runs `attempt`, whose calls are not sent after `by` (when given).
pub(crate) async fn sending_by<F: std::future::Future>(
    by: Option<tokio::time::Instant>,
    attempt: F,
) -> F::Output {
    match by {
        Some(by) => SEND_BY.scope(by, attempt).await,
        None => attempt.await,
    }
}

/// The send deadline of the calls the current task makes ([`sending_by`]), if any.
pub(crate) fn send_by() -> Option<tokio::time::Instant> {
    SEND_BY.try_with(|by| *by).ok()
}

/// Whether a call with send deadline `by` is too late to be sent.
fn too_late(by: Option<tokio::time::Instant>) -> bool {
    by.is_some_and(|by| tokio::time::Instant::now() >= by)
}

/// `Ok` while a call with send deadline `by` may still be sent, else [`not_sent_in_time`].
pub(crate) fn in_time(by: Option<tokio::time::Instant>) -> redis::RedisResult<()> {
    if too_late(by) {
        Err(not_sent_in_time())
    } else {
        Ok(())
    }
}

/// The error of a call not sent because its send deadline had passed ([`sending_by`]); the
/// settle loop takes it as an outcome that stayed unknown (earlier attempts may have run).
fn not_sent_in_time() -> redis::RedisError {
    redis::RedisError::from(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        "not sent: the time within which a lost reply can be resolved had passed while it waited",
    ))
}

/// A cluster's loads on their way ([`Scripts::cluster_loading`]), until dropped (a caller that
/// leaves mid-load included).
struct ClusterLoading<'a>(&'a AtomicBool);

impl<'a> ClusterLoading<'a> {
    fn new(flag: &'a AtomicBool) -> Self {
        flag.store(true, Ordering::SeqCst);
        Self(flag)
    }
}

impl Drop for ClusterLoading<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// A pipeline of `SCRIPT LOAD` of each of `sources`, for a call to follow.
fn load_pipeline(sources: &[&'static str]) -> redis::Pipeline {
    let mut pipe = redis::pipe();
    for source in sources {
        pipe.cmd("SCRIPT").arg("LOAD").arg(*source);
    }
    pipe
}

/// The replies of a pipeline that starts with `count` loads ([`load_pipeline`]): the first
/// load error, if any, and the replies after the loads.
fn split_loads(mut replies: Vec<Value>, count: usize) -> (Option<redis::RedisError>, Vec<Value>) {
    let rest = replies.split_off(count.min(replies.len()));
    let failed = replies
        .into_iter()
        .find_map(|reply| reply.extract_error().err());
    (failed, rest)
}

/// The error of a call not sent because its caller had gone (nobody reads it).
pub(crate) fn caller_gone() -> redis::RedisError {
    redis::RedisError::from(std::io::Error::new(
        std::io::ErrorKind::Interrupted,
        "the caller left before the call was sent",
    ))
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
        Ok(Connection::new(match self {
            Opener::Standalone(client, config) => Link::Standalone(
                ConnectionManager::new_with_config(client.clone(), config.clone()).await?,
            ),
            Opener::Cluster(builder) => {
                Link::Cluster(builder().build()?.get_async_connection().await?)
            }
            Opener::Sentinel(spec, config, timeout) => Link::Sentinel(Arc::new(
                crate::sentinel::SentinelPrimary::connect(spec, config.clone(), *timeout).await?,
            )),
        }))
    }
}
