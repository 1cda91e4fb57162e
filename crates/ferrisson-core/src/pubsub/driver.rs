//! The subscriber connection's driver: where it connects ([`Source`]), its sessions (classic or
//! sharded) and the task that reconciles the hub's channels with the connection.

use super::*;

/// Where the hub's subscriber connection goes.
#[derive(Clone)]
pub(crate) enum Source {
    /// Classic pub/sub (`SUBSCRIBE`) on one server, which `resolve(n)` names for connection
    /// attempt `n`: a standalone server, a cluster's seed nodes in turn (classic messages reach
    /// every node of a cluster), or the primary the sentinels name now. When the receiver
    /// changes (a Sentinel client moved to a new primary), the connection starts over.
    Classic(Resolver, Option<watch::Receiver<u64>>),
    /// Sharded pub/sub (`SSUBSCRIBE`) over a cluster connection: one connection per shard,
    /// each channel subscribed on the primary of its slot, following failovers and slot moves.
    Sharded(Arc<dyn Fn() -> redis::cluster::ClusterClientBuilder + Send + Sync>),
}

/// Names the server of a classic subscriber connection, for connection attempt `n`.
pub(crate) type Resolver = Arc<
    dyn Fn(u32) -> futures::future::BoxFuture<'static, redis::RedisResult<redis::Client>>
        + Send
        + Sync,
>;

impl Source {
    /// Classic pub/sub on one fixed server.
    pub(crate) fn fixed(client: redis::Client) -> Self {
        Source::Classic(
            Arc::new(move |_| {
                let client = client.clone();
                Box::pin(async move { Ok(client) })
            }),
            None,
        )
    }

    /// Classic pub/sub on the current primary of a Sentinel set-up, moving with it.
    pub(crate) fn sentinel(primary: Arc<crate::sentinel::SentinelPrimary>) -> Self {
        let changes = primary.changes();
        Source::Classic(
            Arc::new(move |_| {
                let client = primary.primary_client();
                Box::pin(async move { Ok(client) })
            }),
            Some(changes),
        )
    }

    /// Classic pub/sub on the first of `clients` that answers, starting again from the next one
    /// after a failure.
    pub(crate) fn rotating(clients: Vec<redis::Client>) -> Self {
        Source::Classic(
            Arc::new(move |n| {
                let len = u32::try_from(clients.len()).unwrap_or(u32::MAX).max(1);
                let pick = usize::try_from(n % len).unwrap_or(0);
                let client = clients.get(pick).cloned();
                Box::pin(async move {
                    client.ok_or_else(|| {
                        redis::RedisError::from((
                            redis::ErrorKind::InvalidClientConfig,
                            "no seed node",
                        ))
                    })
                })
            }),
            None,
        )
    }
}

/// What the subscriber connection reports.
enum Event {
    /// A message on a channel.
    Message(String, Vec<u8>),
    /// The connection subscribed a channel again by itself (a shard's connection came back,
    /// or its slot moved): anything may have been published meanwhile.
    Renewed(String),
    /// The server dropped a channel (its slot moved to another shard): subscribe it again, on
    /// the slot's new owner.
    Dropped(String),
    /// A shard's connection broke (its primary died or fails over).
    ShardDown,
    /// Tracked keys changed (`None`: every key, a flush): their waiters are told as by a
    /// release message ([`crate::tracking`]).
    Invalidated(Option<Vec<Vec<u8>>>),
    /// Nothing to report (a confirmation of our own request).
    Nothing,
}

/// One subscriber connection (classic) or one cluster connection holding a subscriber
/// connection per shard (sharded).
enum Session {
    /// A RESP3 connection: its messages, confirmations and invalidations come as pushes, and
    /// its id (read from `HELLO`) is where the command connections' tracking redirects to.
    Classic {
        conn: redis::aio::MultiplexedConnection,
        pushes: tokio::sync::mpsc::UnboundedReceiver<redis::PushInfo>,
        /// The connection's id, 0 when it could not be read (no tracking then).
        id: u64,
    },
    Sharded {
        conn: redis::cluster_async::ClusterConnection,
        pushes: tokio::sync::mpsc::UnboundedReceiver<redis::PushInfo>,
        /// Confirmations still due for our own (un)subscribe requests, by channel: the others
        /// are the connection's (or the server's) doing.
        expected_subscribes: HashMap<String, u32>,
        expected_unsubscribes: HashMap<String, u32>,
    },
}

impl Session {
    async fn open(source: &Source, attempt: u32) -> redis::RedisResult<Self> {
        match source {
            Source::Classic(resolve, _) => {
                let client = resolve(attempt).await?;
                let info = client.get_connection_info().clone();
                let settings = info
                    .redis_settings()
                    .clone()
                    .set_protocol(redis::ProtocolVersion::RESP3);
                let client = redis::Client::open(info.set_redis_settings(settings))?;
                let (tx, pushes) = tokio::sync::mpsc::unbounded_channel();
                // The driver bounds every request itself.
                let config = redis::AsyncConnectionConfig::new()
                    .set_connection_timeout(None)
                    .set_response_timeout(None)
                    .set_push_sender(tx);
                let mut conn = client
                    .get_multiplexed_async_connection_with_config(&config)
                    .await?;
                // Its id, from `HELLO` (which every user may send; `CLIENT ID` needs a right).
                let id = match redis::cmd("HELLO")
                    .arg(3)
                    .query_async::<Value>(&mut conn)
                    .await
                {
                    Ok(Value::Map(fields)) => fields
                        .iter()
                        .find(|(k, _)| matches!(k, Value::BulkString(k) if k == b"id"))
                        .and_then(|(_, v)| match v {
                            Value::Int(id) => u64::try_from(*id).ok(),
                            _ => None,
                        })
                        .unwrap_or(0),
                    other => {
                        tracing::debug!(reply = ?other, "the subscriber connection's id is unknown: waiters are not tracked");
                        0
                    }
                };
                Ok(Session::Classic { conn, pushes, id })
            }
            Source::Sharded(builder) => {
                let (tx, pushes) = tokio::sync::mpsc::unbounded_channel();
                let client = builder()
                    .use_protocol(redis::ProtocolVersion::RESP3)
                    .push_sender(tx)
                    .build()?;
                let conn = client.get_async_connection().await?;
                Ok(Session::Sharded {
                    conn,
                    pushes,
                    expected_subscribes: HashMap::new(),
                    expected_unsubscribes: HashMap::new(),
                })
            }
        }
    }

    /// Where a command connection's tracking redirects to (0: nowhere, a sharded session).
    fn tracking_id(&self) -> u64 {
        match self {
            Session::Classic { id, .. } => *id,
            Session::Sharded { .. } => 0,
        }
    }

    async fn subscribe(&mut self, channels: &[String]) -> redis::RedisResult<()> {
        match self {
            Session::Classic { conn, .. } => conn.subscribe(channels).await,
            Session::Sharded {
                conn,
                expected_subscribes,
                ..
            } => {
                // One SSUBSCRIBE per slot: a shard channel command may not span slots.
                for group in by_slot(channels) {
                    for c in &group {
                        *expected_subscribes.entry(c.clone()).or_default() += 1;
                    }
                    conn.ssubscribe(&group).await?;
                }
                Ok(())
            }
        }
    }

    async fn unsubscribe(&mut self, channels: &[String]) -> redis::RedisResult<()> {
        match self {
            Session::Classic { conn, .. } => conn.unsubscribe(channels).await,
            Session::Sharded {
                conn,
                expected_unsubscribes,
                ..
            } => {
                for group in by_slot(channels) {
                    for c in &group {
                        *expected_unsubscribes.entry(c.clone()).or_default() += 1;
                    }
                    conn.sunsubscribe(&group).await?;
                }
                Ok(())
            }
        }
    }

    /// The next event; `None` when the connection is gone.
    async fn next(&mut self) -> Option<Event> {
        match self {
            Session::Classic { pushes, .. } => {
                let push = pushes.recv().await?;
                Some(match push.kind {
                    redis::PushKind::Message => match push_channel(&push) {
                        Some(channel) => Event::Message(channel, push_payload(&push)),
                        None => Event::Nothing,
                    },
                    redis::PushKind::Invalidate => Event::Invalidated(match push.data.first() {
                        Some(Value::Array(keys)) => Some(
                            keys.iter()
                                .filter_map(|k| match k {
                                    Value::BulkString(bytes) => Some(bytes.clone()),
                                    _ => None,
                                })
                                .collect(),
                        ),
                        _ => None,
                    }),
                    // The connection is gone: the driver starts over.
                    redis::PushKind::Disconnection => return None,
                    _ => Event::Nothing,
                })
            }
            Session::Sharded {
                pushes,
                expected_subscribes,
                expected_unsubscribes,
                ..
            } => {
                let push = pushes.recv().await?;
                let channel = push_channel(&push);
                let expected = |map: &mut HashMap<String, u32>, channel: &str| {
                    let Some(n) = map.get_mut(channel) else {
                        return false;
                    };
                    *n -= 1;
                    if *n == 0 {
                        map.remove(channel);
                    }
                    true
                };
                Some(match (push.kind.clone(), channel) {
                    (redis::PushKind::SMessage | redis::PushKind::Message, Some(channel)) => {
                        Event::Message(channel, push_payload(&push))
                    }
                    (redis::PushKind::SSubscribe, Some(channel)) => {
                        if expected(expected_subscribes, &channel) {
                            Event::Nothing
                        } else {
                            Event::Renewed(channel)
                        }
                    }
                    (redis::PushKind::SUnsubscribe, Some(channel)) => {
                        if expected(expected_unsubscribes, &channel) {
                            Event::Nothing
                        } else {
                            Event::Dropped(channel)
                        }
                    }
                    (redis::PushKind::Disconnection, _) => Event::ShardDown,
                    _ => Event::Nothing,
                })
            }
        }
    }
}

use redis::Value;

/// The channel a push names first (a message's, a subscription's; the library's channel names
/// are UTF-8).
fn push_channel(push: &redis::PushInfo) -> Option<String> {
    match push.data.first() {
        Some(Value::BulkString(bytes)) => Some(String::from_utf8_lossy(bytes).into_owned()),
        _ => None,
    }
}

/// A message push's payload (empty when it carries none).
fn push_payload(push: &redis::PushInfo) -> Vec<u8> {
    match push.data.get(1) {
        Some(Value::BulkString(bytes)) => bytes.clone(),
        _ => Vec::new(),
    }
}

/// `channels` grouped by hash slot (the order within a group kept).
fn by_slot(channels: &[String]) -> Vec<Vec<String>> {
    let mut groups: HashMap<u16, Vec<String>> = HashMap::new();
    for c in channels {
        groups
            .entry(crate::keys::hash_slot(c))
            .or_default()
            .push(c.clone());
    }
    groups.into_values().collect()
}

pub(super) struct Driver {
    pub(super) shared: Arc<HubShared>,
    pub(super) source: Source,
    pub(super) connect_timeout: Duration,
    pub(super) response_timeout: Duration,
    pub(super) retry: RetryPolicy,
}

/// How long a channel stays subscribed after its last waiter left.
const LINGER: Duration = Duration::from_secs(2);

/// Resolves when the primary moved (never without a change signal, or once it is gone).
async fn primary_moved(changes: &mut Option<watch::Receiver<u64>>) {
    match changes {
        Some(changes) => {
            if changes.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
        None => std::future::pending().await,
    }
}

/// Sleeps until `due`; forever when there is none.
async fn sleep_until_some(due: Option<Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due).await,
        None => std::future::pending().await,
    }
}

impl Driver {
    pub(super) async fn run(self) {
        let mut failures = 0u32;
        let mut attempt = 0u32;
        loop {
            if self.shared.state().closed {
                return;
            }
            let connection =
                tokio::time::timeout(self.connect_timeout, Session::open(&self.source, attempt))
                    .await;
            attempt = attempt.wrapping_add(1);
            let mut session = match connection {
                Ok(Ok(session)) => session,
                Ok(Err(e)) => {
                    failures += 1;
                    tracing::debug!(error = %e, failures, "pub/sub connection failed");
                    self.pause(failures).await;
                    continue;
                }
                Err(_) => {
                    failures += 1;
                    tracing::debug!(failures, "pub/sub connection timed out");
                    self.pause(failures).await;
                    continue;
                }
            };
            // The next connection starts with the same server, unless this one fails.
            attempt = attempt.wrapping_sub(1);
            let reconnected = {
                let mut state = self.shared.state();
                state.epoch += 1;
                state.connected = true;
                // Nothing is subscribed on the new connection until the first reconcile.
                state.live.clear();
                self.shared.live.store(0, Ordering::Release);
                state.epoch > 1
            };
            if failures > 0 || reconnected {
                tracing::info!("pub/sub connection established");
            }
            let mut moved = match &self.source {
                Source::Classic(_, Some(changes)) => {
                    let mut changes = changes.clone();
                    changes.mark_unchanged();
                    Some(changes)
                }
                _ => None,
            };
            let mut subscribed = HashSet::new();
            let mut lingering = HashMap::new();
            let mut healthy = self
                .reconcile(&mut session, &mut subscribed, &mut lingering)
                .await;
            // Tracked calls redirect here from now on (the command connection is armed again
            // for this id with its next tracked call).
            self.shared.tracking.subscriber(session.tracking_id());
            if reconnected {
                // Whatever happened while the connection was down, nobody was told.
                // (Also after a shard went down and the session started over.)
                self.shared.wake_everyone();
            }
            while healthy {
                let linger_due = lingering.values().min().copied();
                tokio::select! {
                    biased;
                    () = self.shared.kick.notified() => {
                        if self.shared.state().closed {
                            return;
                        }
                        healthy = self.reconcile(&mut session, &mut subscribed, &mut lingering).await;
                    }
                    () = sleep_until_some(linger_due) => {
                        healthy = self.reconcile(&mut session, &mut subscribed, &mut lingering).await;
                    }
                    event = session.next() => match event {
                        Some(Event::Message(channel, payload)) => self.shared.message(&channel, &payload),
                        Some(Event::Renewed(channel)) => {
                            tracing::debug!(%channel, "channel subscribed again by the connection");
                            self.wake_channel(&channel);
                        }
                        Some(Event::Dropped(channel)) => {
                            // The slot moved. This connection's view of the slots is stale, and
                            // subscribing there would bounce off the old owner: start over with a
                            // fresh view, subscribing every channel where its slot is served now
                            // (waiters are woken to re-check; their calls follow the slot).
                            tracing::info!(%channel, "the server dropped a shard channel (its slot moved); subscribing again");
                            healthy = false;
                        }
                        Some(Event::ShardDown) => {
                            // Its slots may have a new primary by the time it is back, which this
                            // connection would not learn while it sends nothing there: start
                            // over with a fresh view of the cluster, subscribing every channel
                            // where its slot is served now (until then, waiters re-check on
                            // their bounded waits).
                            tracing::info!("a shard's subscriber connection broke; subscribing again");
                            healthy = false;
                        }
                        Some(Event::Invalidated(keys)) => self.shared.invalidated(keys.as_deref()),
                        Some(Event::Nothing) => {}
                        None => healthy = false,
                    },
                    () = primary_moved(&mut moved) => {
                        tracing::info!("the primary moved: the subscriber connection follows");
                        healthy = false;
                    }
                }
            }
            self.shared.tracking.subscriber(0);
            {
                let mut state = self.shared.state();
                state.connected = false;
                state.live.clear();
                self.shared.live.store(0, Ordering::Release);
            }
            self.shared.confirmations.send_modify(|n| *n += 1);
            tracing::warn!("pub/sub connection lost; waiters fall back to bounded re-checks");
            // Every waiter looks now: a Redis that went away is an outage their tries must
            // see (the outage limit runs from then), not one they sleep through.
            self.shared.wake_everyone();
            failures = 1;
            attempt = attempt.wrapping_add(1);
            self.pause(failures).await;
        }
    }

    fn wake_channel(&self, name: &str) {
        if let Some(channel) = self.shared.state().channels.get(name) {
            channel.wake(Wake::All);
        }
    }

    /// Backs off before the next connection attempt. Channel changes meanwhile leave a kick
    /// stored, so the first loop after reconnecting reconciles them.
    async fn pause(&self, failures: u32) {
        tokio::time::sleep(self.retry.pause(failures)).await;
    }

    /// Brings the connection's subscriptions in line with the channels waiters are on.
    /// Returns false when the connection failed.
    async fn reconcile(
        &self,
        session: &mut Session,
        subscribed: &mut HashSet<String>,
        lingering: &mut HashMap<String, Instant>,
    ) -> bool {
        let (to_subscribe, to_unsubscribe) = {
            let mut state = self.shared.state();
            let add: Vec<String> = state
                .channels
                .iter()
                .filter(|(c, channel)| !channel.local && !subscribed.contains(*c))
                .map(|(c, _)| c.clone())
                .collect();
            // A channel nobody waits on any more lingers before it is unsubscribed: the same
            // waiter (a task taking a fair lock in a loop) is often back within moments, and
            // then needs neither a SUBSCRIBE nor the wait for its confirmation.
            let now = Instant::now();
            lingering.retain(|c, _| !state.channels.contains_key(c));
            let mut remove = Vec::new();
            for c in subscribed
                .iter()
                .filter(|c| !state.channels.contains_key(*c))
            {
                let due = *lingering.entry(c.clone()).or_insert(now + LINGER);
                if due <= now {
                    remove.push(c.clone());
                }
            }
            // Out of `live` before the UNSUBSCRIBE is sent: no waiter may count on a channel
            // that is going away.
            for c in &remove {
                state.live.remove(c);
            }
            self.shared.live.store(state.live.len(), Ordering::Release);
            (add, remove)
        };
        if !to_subscribe.is_empty() {
            match tokio::time::timeout(self.response_timeout, session.subscribe(&to_subscribe))
                .await
            {
                Ok(Ok(())) => subscribed.extend(to_subscribe),
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "subscribe failed");
                    return false;
                }
                Err(_) => {
                    tracing::warn!("subscribe timed out");
                    return false;
                }
            }
        }
        if !to_unsubscribe.is_empty() {
            match tokio::time::timeout(self.response_timeout, session.unsubscribe(&to_unsubscribe))
                .await
            {
                Ok(Ok(())) => {
                    for c in &to_unsubscribe {
                        subscribed.remove(c);
                        lingering.remove(c);
                    }
                }
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "unsubscribe failed");
                    return false;
                }
                Err(_) => {
                    tracing::warn!("unsubscribe timed out");
                    return false;
                }
            }
        }
        {
            let mut state = self.shared.state();
            let epoch = state.epoch;
            for (name, channel) in state.channels.iter_mut() {
                if subscribed.contains(name) {
                    channel.confirmed_epoch = epoch;
                }
            }
            state.live.clone_from(subscribed);
            self.shared.live.store(state.live.len(), Ordering::Release);
        }
        self.shared.confirmations.send_modify(|n| *n += 1);
        true
    }
}
