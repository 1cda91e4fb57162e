//! The primary of a Redis Sentinel set-up, followed across failovers.
//!
//! Commands go over one multiplexed connection to the primary the sentinels named last. When a
//! command fails in a way a failover explains (the connection broke, timed out or was refused;
//! the server answers `READONLY` because it was demoted to a replica), the sentinels are asked
//! again. If they name another primary, the connection moves there, and every subscriber of
//! [`changes`](SentinelPrimary::changes) (the hub's driver) reconnects too. The failed command
//! itself is not resent here: the client's retry loop does that, by the usual rules.

use std::sync::RwLock;
use std::time::Duration;

use redis::Value;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
use tokio::sync::{Mutex, watch};

use crate::config::SentinelSpec;

struct Current {
    /// Bumped at each move to another primary.
    generation: u64,
    /// The primary's address, as the sentinels gave it.
    address: String,
    /// How to reach it (credentials and TLS included), for subscriber connections.
    client: redis::Client,
    manager: ConnectionManager,
}

/// The connection to the current primary of a Sentinel set-up.
pub(crate) struct SentinelPrimary {
    /// Asks the sentinels (one question at a time).
    sentinels: Mutex<SentinelClient>,
    current: RwLock<Current>,
    manager_config: ConnectionManagerConfig,
    connect_timeout: Duration,
    changes: watch::Sender<u64>,
    primary_name: String,
}

impl SentinelPrimary {
    /// Asks the sentinels for the primary and connects to it.
    pub(crate) async fn connect(
        spec: &SentinelSpec,
        manager_config: ConnectionManagerConfig,
        connect_timeout: Duration,
    ) -> redis::RedisResult<Self> {
        let mut info = redis::RedisConnectionInfo::default().set_db(spec.db);
        if let Some(user) = &spec.username {
            info = info.set_username(user);
        }
        if let Some(password) = &spec.password {
            info = info.set_password(password);
        }
        #[allow(unused_mut)]
        let mut node = SentinelNodeConnectionInfo::default().set_redis_connection_info(info);
        if spec.tls {
            node = node.set_tls_mode(redis::TlsMode::Secure);
        }
        let mut sentinels = SentinelClient::build(
            spec.sentinels.clone(),
            spec.primary_name.clone(),
            Some(node),
            SentinelServerType::Master,
        )?;
        let client = ask(&mut sentinels, connect_timeout).await?;
        let address = client.get_connection_info().addr().to_string();
        let manager =
            ConnectionManager::new_with_config(client.clone(), manager_config.clone()).await?;
        tracing::debug!(primary = %address, name = %spec.primary_name, "sentinels named the primary");
        Ok(Self {
            sentinels: Mutex::new(sentinels),
            current: RwLock::new(Current {
                generation: 0,
                address,
                client,
                manager,
            }),
            manager_config,
            connect_timeout,
            changes: watch::Sender::new(0),
            primary_name: spec.primary_name.clone(),
        })
    }

    fn current(&self) -> (u64, ConnectionManager) {
        let current = self.current.read().unwrap_or_else(|e| e.into_inner());
        (current.generation, current.manager.clone())
    }

    /// Sends `cmd` to the current primary; after a failure a failover explains, asks the
    /// sentinels whether the primary moved (and moves along) before returning the failure.
    ///
    /// The future's type is erased: awaited inside every synchronizer's futures, the concrete
    /// type of the sentinel lookups would nest too deep for the compiler's `Send` checks.
    pub(crate) fn query<'a>(
        &'a self,
        cmd: &'a redis::Cmd,
    ) -> futures::future::BoxFuture<'a, redis::RedisResult<Value>> {
        Box::pin(async move {
            let (generation, mut manager) = self.current();
            let result = manager
                .send_packed_command(cmd)
                .await
                .and_then(crate::error::top_level_error);
            if let Err(e) = &result
                && crate::error::is_transient(e)
            {
                self.follow(generation).await;
            }
            result
        })
    }

    /// The first `count` commands of `pipe` in one round trip to the current primary,
    /// following it as [`query`](Self::query) does.
    pub(crate) fn pipeline<'a>(
        &'a self,
        pipe: &'a redis::Pipeline,
        count: usize,
    ) -> futures::future::BoxFuture<'a, redis::RedisResult<Vec<Value>>> {
        Box::pin(async move {
            let (generation, mut manager) = self.current();
            let result = manager.send_packed_commands(pipe, 0, count).await;
            let failed = match &result {
                Err(e) => crate::error::is_transient(e),
                Ok(replies) => replies
                    .iter()
                    .any(|r| matches!(r, Value::ServerError(e) if e.code() == "READONLY")),
            };
            if failed {
                self.follow(generation).await;
            }
            result
        })
    }

    /// Asks the sentinels for the primary, unless another caller has moved on since
    /// `generation`; connects to it when it is a new one.
    fn follow(&self, generation: u64) -> futures::future::BoxFuture<'_, ()> {
        Box::pin(self.follow_inner(generation))
    }

    async fn follow_inner(&self, generation: u64) {
        let mut sentinels = self.sentinels.lock().await;
        if self.current().0 != generation {
            return;
        }
        let client = match ask(&mut sentinels, self.connect_timeout).await {
            Ok(client) => client,
            Err(e) => {
                tracing::debug!(error = %e, name = %self.primary_name, "the sentinels named no primary (yet)");
                return;
            }
        };
        let address = client.get_connection_info().addr().to_string();
        if address
            == self
                .current
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .address
        {
            return;
        }
        let connected = tokio::time::timeout(
            self.connect_timeout,
            ConnectionManager::new_with_config(client.clone(), self.manager_config.clone()),
        )
        .await;
        let manager = match connected {
            Ok(Ok(manager)) => manager,
            Ok(Err(e)) => {
                tracing::debug!(error = %e, primary = %address, "cannot reach the new primary yet");
                return;
            }
            Err(_) => {
                tracing::debug!(primary = %address, "connecting to the new primary timed out");
                return;
            }
        };
        let generation = {
            let mut current = self.current.write().unwrap_or_else(|e| e.into_inner());
            tracing::warn!(
                from = %current.address,
                to = %address,
                name = %self.primary_name,
                "the primary moved (a Sentinel failover): following it"
            );
            current.generation += 1;
            current.address = address;
            current.client = client;
            current.manager = manager;
            current.generation
        };
        self.changes.send_replace(generation);
    }

    /// The current primary, for a new subscriber connection.
    pub(crate) fn primary_client(&self) -> redis::Client {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .client
            .clone()
    }

    /// Moves to another primary, as a counter: the hub reconnects when it changes.
    pub(crate) fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }
}

/// Asks the sentinels for the primary, within `timeout`.
async fn ask(
    sentinels: &mut SentinelClient,
    timeout: Duration,
) -> redis::RedisResult<redis::Client> {
    match tokio::time::timeout(timeout, sentinels.async_get_client()).await {
        Ok(result) => result,
        Err(_) => Err(redis::RedisError::from((
            redis::ErrorKind::Io,
            "the sentinels did not answer in time",
        ))),
    }
}
