//! What the read-write lock tells inspection of itself ([`KindInspection`]): `Client::inspect`,
//! `list_objects` and the `ferrisson` command-line tool learn the kind from this crate.

use ferrisson_core::__engine::{INSPECT_PRELUDE, Script, delete_through, inventory};
use ferrisson_core::{
    Client, HoldMode, Holder, KindFacts, KindInspection, ObjectFuture, ObjectInfo,
};

use crate::ReadWriteLock;

/// Reading a read-write lock's holds and their leases (`lua/inspect.lua`).
pub(crate) static INSPECT: Script = Script::with_prelude(
    "rwlock/inspect",
    &INSPECT_PRELUDE,
    include_str!("../lua/inspect.lua"),
);

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
                    .and_then(|r| facts.duration(r.get(1)?));
                (field.as_str(), HoldMode::Read, lease)
            }
        };
        let count = count.parse().unwrap_or(0);
        info.holders
            .push(Holder::new(owner.to_owned(), mode, count, lease_left));
    }
    info.holders.sort_by(|a, b| a.owner.cmp(&b.owner));
    info.fencing_token = facts.fencing_token();
}

/// The protocol's read-write lock channel, `redisson_rwlock:{<key>}`.
fn channel(key: &str) -> String {
    ferrisson_core::__engine::keys::prefixed("redisson_rwlock", key)
}

/// The command-line tool's force unlock: the read-write lock's own (both sides).
fn force_unlock<'a>(client: &'a Client, name: &'a str) -> ObjectFuture<'a> {
    Box::pin(async move { ReadWriteLock::new(client, name)?.force_unlock().await })
}

/// The command-line tool's delete: the read-write lock's own.
fn delete<'a>(client: &'a Client, name: &'a str) -> ObjectFuture<'a> {
    delete_through(ReadWriteLock::new(client, name))
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
