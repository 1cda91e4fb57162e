//! The command connection (standalone, cluster or sentinel) and how to open another one.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use redis::Value;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::error::top_level_error;
use crate::script::{Script, ScriptCall};

/// A load under way ([`Scripts::busy`] while it lives); unless it is marked done, the
/// connection is stale again when it ends (a load that failed or was dropped).
struct Loading<'a> {
    scripts: &'a Scripts,
    done: bool,
}

impl<'a> Loading<'a> {
    fn start(scripts: &'a Scripts) -> Self {
        scripts.busy.store(true, Ordering::Release);
        Self {
            scripts,
            done: false,
        }
    }
}

impl Drop for Loading<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.scripts.stale.store(true, Ordering::Release);
        }
        self.scripts.attempts.fetch_add(1, Ordering::AcqRel);
        self.scripts.busy.store(false, Ordering::Release);
    }
}

/// The command connection: the link to the deployment, and what the server is known to lack.
///
/// Scripts are loaded on every (re)connect, before the first call on it: a connection
/// starts [stale](Scripts::stale), and becomes stale again when a command on it fails in a way
/// that may mean the link was lost (the connection then reconnects, possibly to a restarted
/// or failed-over server, which has no scripts) or when a call meets `NOSCRIPT` anyway (a
/// `SCRIPT FLUSH`, a reconnect the client did not see). The next script call on a stale
/// connection first sends `SCRIPT LOAD` for every script this process has sent
/// ([`crate::script::sent_sources`]), once for all the calls waiting meanwhile; `NOSCRIPT`,
/// answered by `EVAL`, stays the fallback.
#[derive(Clone)]
pub(crate) struct Connection {
    link: Link,
    scripts: Arc<Scripts>,
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

/// Whether a connection's server may lack scripts, and the turn to load them.
struct Scripts {
    /// Set at the start and after a failure that may have been a lost link: the next script
    /// call loads every sent script first.
    stale: AtomicBool,
    /// How many of the scripts this process has sent ([`crate::script::sent_count`]) the
    /// server was given since the connection was last stale: a script first sent later is
    /// loaded before its first call too.
    loaded: AtomicUsize,
    /// One load at a time; calls arriving meanwhile wait for it.
    loading: tokio::sync::Mutex<()>,
    /// A load is under way: every script call waits for it, even one whose script is loaded,
    /// so that calls reach Redis in the order they were made (a cancelled acquire's clean-up,
    /// queued behind it, must run after it).
    busy: AtomicBool,
    /// Set when the server refused a load outright (no `SCRIPT LOAD` right): the connection
    /// relies on the `NOSCRIPT` fallback from then on.
    refused: AtomicBool,
    /// Loads tried so far: a call that waited for one does not try again after it failed
    /// (during an outage, calls would take turns timing out), it falls back on `NOSCRIPT`.
    attempts: AtomicU64,
}

impl Connection {
    pub(crate) fn new(link: Link) -> Self {
        Self {
            link,
            scripts: Arc::new(Scripts {
                stale: AtomicBool::new(true),
                loaded: AtomicUsize::new(0),
                loading: tokio::sync::Mutex::new(()),
                busy: AtomicBool::new(false),
                refused: AtomicBool::new(false),
                attempts: AtomicU64::new(0),
            }),
        }
    }

    /// The followed primary, on a Sentinel set-up.
    pub(crate) fn sentinel(&self) -> Option<&Arc<crate::sentinel::SentinelPrimary>> {
        match &self.link {
            Link::Sentinel(primary) => Some(primary),
            _ => None,
        }
    }

    /// Notes that `script` (its batch form when `batch` is set) is about to be sent, and, when
    /// the server may lack scripts, loads every script sent so far first (once, whoever asks
    /// meanwhile waits for that load, and is sent after the call that loaded, in the order the
    /// calls came). A failed load is left to the `NOSCRIPT` fallback and tried again before
    /// the next call.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a dropped load leaves the connection stale, so the next call loads.
    pub(crate) async fn ready_for(&self, script: &'static Script, batch: bool) {
        script.note_sent(batch);
        if self.scripts.refused.load(Ordering::Relaxed) {
            return;
        }
        if !self.scripts.stale.load(Ordering::Acquire)
            && !self.scripts.busy.load(Ordering::Acquire)
            && self.scripts.loaded.load(Ordering::Acquire) >= crate::script::sent_count()
        {
            return;
        }
        // Boxed: the load's future (every link's command future) stays out of the type of
        // every call's future.
        self.load_sent_scripts().await;
    }

    /// The loading half of [`ready_for`](Self::ready_for).
    fn load_sent_scripts(&self) -> futures::future::BoxFuture<'_, ()> {
        Box::pin(async move {
            let seen = self.scripts.attempts.load(Ordering::Acquire);
            let _turn = self.scripts.loading.lock().await;
            if self.scripts.attempts.load(Ordering::Acquire) != seen
                && self.scripts.stale.load(Ordering::Acquire)
            {
                // A load failed while this call waited: the call falls back on `NOSCRIPT`,
                // and a later one tries again.
                return;
            }
            let mut loading = Loading::start(&self.scripts);
            let from = if self.scripts.stale.swap(false, Ordering::AcqRel) {
                0
            } else {
                self.scripts.loaded.load(Ordering::Acquire)
            };
            let sources = crate::script::sent_sources(from);
            if sources.is_empty() {
                loading.done = true;
                return;
            }
            let mut failed = self.load(&sources).await;
            if failed
                .as_ref()
                .is_some_and(redis::RedisError::is_connection_dropped)
            {
                // The link's old socket, found dead at once: the connection reconnects, and
                // the load goes to the new one.
                failed = self.load(&sources).await;
            }
            match failed {
                None => {
                    loading.done = true;
                    self.scripts
                        .loaded
                        .store(from + sources.len(), Ordering::Release);
                    tracing::debug!(
                        scripts = sources.len(),
                        "scripts loaded on the (re)connected server"
                    );
                    crate::metrics::scripts_loaded(sources.len());
                }
                Some(e) if matches!(e.code(), Some("NOPERM" | "ERR")) => {
                    // Refused, not lost (a user without the `SCRIPT LOAD` right, a server that
                    // lacks the command): asking again would cost every call a round trip.
                    // (A server still loading its data answers `LOADING`, and is asked again.)
                    self.scripts.refused.store(true, Ordering::Relaxed);
                    tracing::warn!(error = %e, "the server refused SCRIPT LOAD: scripts are sent with EVAL when the server lacks them (grant +script|load, docs/deployment.md)");
                }
                Some(e) => {
                    // Left stale (`loading`): the next call tries again, and this one falls
                    // back on `NOSCRIPT`.
                    tracing::debug!(error = %e, "loading the scripts failed; the next call tries again");
                }
            }
        })
    }

    /// `SCRIPT LOAD` of each of `sources` (on a cluster, to every node), pipelined: the first
    /// error, if any.
    async fn load(&self, sources: &[&'static str]) -> Option<redis::RedisError> {
        let loads = sources.iter().map(|source| async move {
            let mut cmd = redis::cmd("SCRIPT");
            cmd.arg("LOAD").arg(*source);
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
        if let Err(e) = result
            && (e.is_io_error()
                || e.is_connection_dropped()
                || e.is_connection_refusal()
                || e.is_timeout()
                || e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript))
        {
            self.mark_stale();
        }
    }

    /// The server may lack scripts: the next script call loads them first.
    pub(crate) fn mark_stale(&self) {
        self.scripts.stale.store(true, Ordering::Release);
    }

    /// `EVALSHA`; on `NOSCRIPT` (a restarted or flushed server), `SCRIPT LOAD` and again.
    pub(crate) async fn eval(&self, call: &ScriptCall) -> redis::RedisResult<Value> {
        self.eval_if_wanted(call, || true).await
    }

    /// As [`eval`](Self::eval), but after a wait for the scripts to load, or after `NOSCRIPT`,
    /// the call is sent only if `wanted()` still says so: a call whose caller has gone is not
    /// sent (it did not run, and the caller's clean-up, sent meanwhile, may have run already:
    /// the call would run after it).
    pub(crate) async fn eval_if_wanted(
        &self,
        call: &ScriptCall,
        wanted: impl Fn() -> bool,
    ) -> redis::RedisResult<Value> {
        if !call.is_plain() {
            self.ready_for(call.script(), false).await;
            if !wanted() {
                // The caller left while the scripts were loading: the call has not run and
                // is not sent (its clean-up may be on its way).
                return Err(caller_gone());
            }
        }
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
