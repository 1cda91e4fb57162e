//! Reading one object: [`Client::inspect`] and what it asks the server.

use super::*;

impl Client {
    /// Everything the Redis layout says about the synchronizer named `name`: its kind, its
    /// holders (owner, hold count, lease left, and who the owner is: the app, host and pid of
    /// a ferrisson client from its record, the client id of a Redisson one), its waiters,
    /// its permits, a latch's count and participants, a rate limiter's window, the fencing
    /// counter. Read-only: nothing is changed, no waiter is woken.
    ///
    /// The kind comes from the layout; where two kinds share one (a semaphore and a latch
    /// armed by Redisson, a lock and an idle spin lock) the guess is marked
    /// ([`ObjectInfo::kind_certain`]): [`inspect_as`](Self::inspect_as) settles it.
    ///
    /// One script call reads the object's keys (one slot on a cluster); the wake-up channel's
    /// subscribers and the owners' records are read next, in parallel.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = ferrisson_testkit::RedisServer::spawn();
    /// use ferrisson_core::{Client, ClientConfig, ObjectKind};
    ///
    /// let client = Client::with_config(
    ///     ClientConfig::new(server.url()).with_app_name("billing-closer"),
    /// ).await?;
    /// # let owner = client.new_owner();
    /// # let mut con = redis::Client::open(server.url())?.get_multiplexed_async_connection().await?;
    /// # let _: () = redis::cmd("HSET").arg("billing:close").arg(owner.as_str()).arg(1).query_async(&mut con).await?;
    /// # let _: () = redis::cmd("PEXPIRE").arg("billing:close").arg(30_000).query_async(&mut con).await?;
    /// # client.refresh_record().await?;
    /// let info = client.inspect("billing:close").await?;
    /// assert_eq!(info.kind, Some(ObjectKind::Lock));
    /// let holder = &info.holders[0];
    /// assert!(holder.party.describe().starts_with("billing-closer on "));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] when the key holds data of no synchronizer (a hash of other
    /// fields, a list, …), [`Error::InvalidArgument`] for an empty name, and Redis errors.
    pub async fn inspect(&self, name: &str) -> Result<ObjectInfo> {
        self.inspect_key(self.object_key(name)?, None).await
    }

    /// As [`inspect`](Self::inspect), for an object the caller knows the kind of.
    ///
    /// # Errors
    ///
    /// As [`inspect`](Self::inspect), and [`Error::WrongType`] when the key holds another
    /// kind's layout (a hash where a semaphore's count would be, say).
    pub async fn inspect_as(&self, name: &str, kind: ObjectKind) -> Result<ObjectInfo> {
        self.inspect_key(self.object_key(name)?, Some(kind)).await
    }

    /// Everything [`inspect`](Self::inspect) says of the object at `key` (read as `hint`
    /// when given): its layout, then who stands behind it and who waits on its channel.
    pub(super) async fn inspect_key(
        &self,
        key: String,
        hint: Option<ObjectKind>,
    ) -> Result<ObjectInfo> {
        let mut info = self.read_layout(key, hint).await?;
        self.finish_info(&mut info).await?;
        Ok(info)
    }

    /// What the layout at `key` says (read as `hint` when given), without the parties behind
    /// its owners nor its subscribers ([`finish_info`](Self::finish_info)): what the wait
    /// graph needs.
    pub(super) async fn read_layout(
        &self,
        key: String,
        hint: Option<ObjectKind>,
    ) -> Result<ObjectInfo> {
        if let Some(ObjectKind::Registered(kind)) = hint {
            if let Some(info) = self.inspect_registered(&key, kind, true).await? {
                return Ok(info);
            }
            // Say what it holds instead, where the layouts read here tell.
            let found = self.core_facts(&key).await?.kind(&key).ok().flatten();
            let hint = ObjectKind::Registered(kind);
            return Err(Error::InvalidArgument(match found {
                Some((found, _)) => format!(
                    "`{key}` holds {} {found}, not {} {hint}",
                    found.article(),
                    hint.article()
                ),
                None => format!("`{key}` does not hold {} {hint}", hint.article()),
            }));
        }
        let facts = self.core_facts(&key).await?;
        let detected = match facts.kind(&key) {
            // A layout of none of the kinds read here: perhaps a registered kind's.
            Err(Error::WrongType { .. }) if hint.is_none() => {
                return match self.registered_claim(&key, &facts.main_type, false).await? {
                    Some(info) => Ok(info),
                    None => Err(Error::WrongType { key }),
                };
            }
            detected => detected?,
        };
        // A layout the kinds read here only could be (a bare count, a lock hash with no
        // token): a registered kind that is sure of it (a latch with its round) says so.
        // A count is one even with a reservation: the expirable semaphore reserves the same
        // way, and says so when its taken permits stand beside the count.
        if hint.is_none()
            && matches!(detected, Some((_, false) | (ObjectKind::Semaphore, _)))
            && let Some(info) = self.registered_claim(&key, &facts.main_type, true).await?
        {
            return Ok(info);
        }
        let (kind, certain) = match (hint, detected) {
            (Some(hint), Some((found, _))) => {
                // A lock hash fits only the reentrant lock here, a count only the semaphore:
                // every other kind is a registered one, which reads the key itself when
                // named (above).
                if hint != found {
                    return Err(Error::InvalidArgument(format!(
                        "`{key}` holds {} {found}, not {} {hint}",
                        found.article(),
                        hint.article()
                    )));
                }
                (Some(hint), true)
            }
            // Nothing stored under the name: what a registered kind keeps beside it may
            // outlive it (an expirable semaphore's taken permits), which that kind says.
            (None, None) => {
                if let Some(info) = self.registered_claim(&key, "none", true).await? {
                    return Ok(info);
                }
                (None, true)
            }
            // Nothing stored: nothing to say of a kind named.
            (Some(_), None) => (None, true),
            (None, Some((found, certain))) => (Some(found), certain),
        };
        let mut info = ObjectInfo::empty(self, &key, facts.pttl, facts.now);
        info.kind = kind;
        info.kind_certain = certain;
        let Some(kind) = kind else {
            return Ok(info);
        };
        if kind.is_hash() != (facts.main_type == "hash") && facts.main_type != "none" {
            return Err(Error::WrongType { key });
        }
        let lease = positive_ms(facts.pttl);
        if kind == ObjectKind::Lock {
            for (owner, count) in &facts.fields {
                info.holders.push(Holder {
                    owner: owner.clone(),
                    mode: HoldMode::Exclusive,
                    count: count.parse().unwrap_or(0),
                    lease_left: lease,
                    party: Party::Unknown,
                });
            }
        }
        info.holders.sort_by(|a, b| a.owner.cmp(&b.owner));
        info.fencing_token = kind
            .is_lock()
            .then_some(facts.token.as_deref())
            .flatten()
            .and_then(|t| t.parse().ok());
        let count = facts
            .value
            .as_deref()
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or(0);
        if kind == ObjectKind::Semaphore {
            info.permits = Some(PermitState::new(
                count,
                None,
                Vec::new(),
                facts
                    .reservation
                    .as_ref()
                    .and_then(|(v, pttl)| positive_ms(*pttl).map(|left| (v.clone(), left))),
            ));
        }
        Ok(info)
    }

    /// What `core/inspect` reads of `key`.
    async fn core_facts(&self, key: &str) -> Result<Facts> {
        let call = ScriptCall::new(&INSPECT, &[key]);
        let reply: Vec<Vec<String>> = self.eval_read(&call).await.map_err(|e| match e {
            Error::Redis(e) => crate::error::map_redis_error(e, key),
            e => e,
        })?;
        Ok(Facts::parse(reply))
    }

    /// Fills in what the core finds out about any kind's object once its kind read it: the
    /// wake-up channel's subscribers, and who stands behind each holder, waiter and permit
    /// (the records of their clients, read in parallel).
    async fn finish_info(&self, info: &mut ObjectInfo) -> Result<()> {
        let mut tags: Vec<u64> = Vec::new();
        let owners = info.holders.iter().map(|h| h.owner.as_str());
        let owners = owners.chain(info.waiters.iter().map(|w| w.owner.as_str()));
        let permits = info.permits.iter().flat_map(|p| p.permits.iter());
        for owner in owners.chain(permits.map(|p| p.id.as_str())) {
            if let Some(t) = owner_tag(owner)
                && !tags.contains(&t)
            {
                tags.push(t);
            }
        }
        let subscribers = async {
            match info.kind {
                Some(kind) => self.subscribers(kind, &info.key).await,
                None => None,
            }
        };
        let (subscribers, records) = futures::join!(subscribers, self.client_records(&tags));
        info.subscribers = subscribers;
        let records = records?;
        let party = |tag: Option<u64>, owner: &str| match tag.and_then(|t| records.get(&t)) {
            Some(record) => Party::Ferrisson(record.clone()),
            None => match client_tag(owner) {
                Some(_) => Party::Unrecorded {
                    client_id: owner.get(..36).unwrap_or(owner).to_owned(),
                },
                None => Party::Unknown,
            },
        };
        for h in &mut info.holders {
            h.party = party(owner_tag(&h.owner), &h.owner);
        }
        for w in &mut info.waiters {
            w.party = party(owner_tag(&w.owner), &w.owner);
        }
        if let Some(p) = &mut info.permits {
            for permit in &mut p.permits {
                permit.party = match owner_tag(&permit.id).and_then(|t| records.get(&t)) {
                    Some(record) => Party::Ferrisson(record.clone()),
                    None => Party::Unknown,
                };
            }
        }
        Ok(())
    }

    /// The number of connections subscribed to `kind`'s wake-up channel for `key`, `None`
    /// when the kind has none or the server did not answer.
    async fn subscribers(&self, kind: ObjectKind, key: &str) -> Option<u64> {
        let channel = wake_channel(kind, key)?;
        let sub = match self.config().publish_command() {
            crate::config::PublishCommand::Spublish => "SHARDNUMSUB",
            _ => "NUMSUB",
        };
        let reply: Value = self
            .query(redis::cmd("PUBSUB").arg(sub).arg(&channel))
            .await
            .map_err(|e| tracing::debug!(error = %e, "PUBSUB {sub} failed"))
            .ok()?;
        let count = |v: &Value| redis::from_redis_value_ref::<u64>(v).ok();
        match &reply {
            Value::Array(items) => items.get(1).and_then(count),
            Value::Map(pairs) => pairs.first().and_then(|(_, v)| count(v)),
            _ => None,
        }
    }

    /// The records of the clients tagged `tags`, those that exist.
    async fn client_records(&self, tags: &[u64]) -> Result<HashMap<u64, ClientRecord>> {
        let reads = tags
            .iter()
            .map(|&tag| async move { (tag, self.record_fields(&record_key(tag)).await) });
        let mut out = HashMap::new();
        for (tag, read) in futures::future::join_all(reads).await {
            if let Some((fields, pttl)) = read?
                && let Some(record) = record_of(fields, pttl)
            {
                out.insert(tag, record);
            }
        }
        Ok(out)
    }

    /// The fields of the client record at `key` and its time to live (ms; `-2`: not known),
    /// `None` for a key of another type (someone else's, under the name).
    pub(super) async fn record_fields(
        &self,
        key: &str,
    ) -> Result<Option<(HashMap<String, String>, i64)>> {
        let (hgetall, pttl) = (
            redis::cmd("HGETALL").arg(key).clone(),
            redis::cmd("PTTL").arg(key).clone(),
        );
        // Both at once: the multiplexed connection sends them in one write, one round trip.
        let (fields, pttl): (Result<HashMap<String, String>>, Result<i64>) =
            futures::join!(self.query(&hgetall), self.query(&pttl));
        match fields {
            Ok(fields) => Ok(Some((fields, pttl.unwrap_or(-2)))),
            Err(Error::Redis(e)) if e.code() == Some("WRONGTYPE") => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The record of the client with id `client_id` (a UUID, or an owner `<id>:<n>`), if it
    /// keeps one.
    ///
    /// # Errors
    ///
    /// Redis errors.
    pub async fn client_record(&self, client_id: &str) -> Result<Option<ClientRecord>> {
        let Some(tag) = client_tag(client_id) else {
            return Ok(None);
        };
        Ok(self.client_records(&[tag]).await?.remove(&tag))
    }

    /// Writes the client's record now (it is also written at connect and every watchdog
    /// period while the client lives): after a `FLUSHALL`, say, or in a test.
    ///
    /// # Errors
    ///
    /// Redis errors; [`Error::InvalidArgument`] when records are off.
    pub async fn refresh_record(&self) -> Result<()> {
        if !self.config().client_record() {
            return Err(Error::InvalidArgument(
                "the client keeps no record (ClientConfig::with_client_record(false))".into(),
            ));
        }
        let call = self.inner.identity.record_call(self.config().lease());
        let _: i64 = self.eval_read(&call).await?;
        Ok(())
    }
}
