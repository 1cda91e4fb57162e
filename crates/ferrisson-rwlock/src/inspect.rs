//! What the read-write lock tells inspection of itself ([`KindInspection`]): `Client::inspect`,
//! `list_objects` and the `ferrisson` command-line tool learn the kind from this crate.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use ferrisson_core::__engine::{INSPECT_PRELUDE, Script, inventory};
use ferrisson_core::{Client, HoldMode, Holder, KindFacts, KindInspection, ObjectInfo, Result};

use crate::ReadWriteLock;

/// Reading a read-write lock's holds and their leases (`lua/inspect.lua`).
pub(crate) static INSPECT: Script = Script::with_prelude(
    "rwlock/inspect",
    &INSPECT_PRELUDE,
    include_str!("../lua/inspect.lua"),
);

/// `ms` as a duration, `None` unless positive.
fn positive_ms(ms: i64) -> Option<Duration> {
    u64::try_from(ms)
        .ok()
        .filter(|&ms| ms > 0)
        .map(Duration::from_millis)
}

/// The writer (its field `<owner>:write`, under the hash's lease) and each reader (under the
/// longest lease of its read holds), sorted by owner, and the fencing counter.
fn read(facts: &KindFacts, info: &mut ObjectInfo) {
    for row in facts.all("field") {
        let [field, count] = row else { continue };
        if field == "mode" {
            continue;
        }
        let (owner, mode, lease_left) = match field.strip_suffix(":write") {
            Some(owner) => (owner, HoldMode::Write, info.ttl),
            None => {
                let lease = facts
                    .all("read_lease")
                    .find(|r| r.first() == Some(field))
                    .and_then(|r| r.get(1)?.parse().ok())
                    .and_then(positive_ms);
                (field.as_str(), HoldMode::Read, lease)
            }
        };
        let count = count.parse().unwrap_or(0);
        info.holders
            .push(Holder::new(owner.to_owned(), mode, count, lease_left));
    }
    info.holders.sort_by(|a, b| a.owner.cmp(&b.owner));
    info.fencing_token = facts.number("token").and_then(|t| u64::try_from(t).ok());
}

/// The protocol's read-write lock channel, `redisson_rwlock:{<key>}`.
fn channel(key: &str) -> String {
    ferrisson_core::__engine::keys::prefixed("redisson_rwlock", key)
}

type Call<'a> = Pin<Box<dyn Future<Output = Result<bool>> + Send + 'a>>;

/// The command-line tool's force unlock: the read-write lock's own (both sides).
fn force_unlock<'a>(client: &'a Client, name: &'a str) -> Call<'a> {
    Box::pin(async move { ReadWriteLock::new(client, name)?.force_unlock().await })
}

/// The command-line tool's delete: the read-write lock's own.
fn delete<'a>(client: &'a Client, name: &'a str) -> Call<'a> {
    use ferrisson_core::SyncObject;
    Box::pin(async move { ReadWriteLock::new(client, name)?.delete().await })
}

inventory::submit! {
    KindInspection {
        name: "rwlock",
        article: "a",
        lock: true,
        main_type: "hash",
        derived: &[],
        derived_inside: &["rwlock_timeout"],
        channel: Some(channel),
        script: &INSPECT,
        read,
        force_unlock: Some(force_unlock),
        delete,
    }
}
