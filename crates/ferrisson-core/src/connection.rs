//! The command connection (standalone, cluster or sentinel) and how to open another one.

use std::sync::Arc;
use std::time::Duration;

use redis::Value;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::error::top_level_error;
use crate::script::ScriptCall;

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
