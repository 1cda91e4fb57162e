//! What the faster multi-lock tells inspection of itself ([`KindInspection`]): `Client::inspect`,
//! `list_objects` and the `ferrisson` command-line tool learn the kind from this crate.

use std::collections::BTreeMap;
use std::time::Duration;

use ferrisson_core::__engine::{INSPECT_PRELUDE, Script, delete_through, inventory, lock_channel};
use ferrisson_core::{
    Client, HoldMode, Holder, KindFacts, KindInspection, ObjectFuture, ObjectInfo,
};

use crate::FasterMultiLock;

/// Reading a group's values and their holders (`lua/inspect.lua`).
pub(crate) static INSPECT: Script = Script::with_prelude(
    "faster_multilock/inspect",
    &INSPECT_PRELUDE,
    include_str!("../lua/inspect.lua"),
);

/// Each owner as a holder of as many values as it holds (until its latest value's lease ends),
/// and each value listed as a detail: its field, holder, hold count and lease left.
fn read(facts: &KindFacts, info: &mut ObjectInfo) {
    let mut owners: BTreeMap<&str, (u64, Option<Duration>)> = BTreeMap::new();
    for row in facts.all("value") {
        let [field, holder, count, expires] = row else {
            continue;
        };
        let left = facts.until(expires);
        let owner = owners.entry(holder).or_default();
        owner.0 += 1;
        owner.1 = owner.1.max(left);
        let left = left.map_or_else(|| "-".to_owned(), |d| format!("{} ms", d.as_millis()));
        info.details.push((
            format!("value {field}"),
            format!("{holder} x{count}, {left} left"),
        ));
    }
    for (owner, (values, left)) in owners {
        info.holders.push(Holder::new(
            owner.to_owned(),
            HoldMode::Exclusive,
            values,
            left,
        ));
    }
    info.details.insert(
        0,
        (
            "values held".into(),
            facts.value("values").unwrap_or("0").into(),
        ),
    );
}

/// The command-line tool's force unlock: every value of the group, whoever holds it.
fn force_unlock<'a>(client: &'a Client, name: &'a str) -> ObjectFuture<'a> {
    Box::pin(async move { FasterMultiLock::force_unlock_group(client, name).await })
}

/// The command-line tool's delete: the group's hash, every value with it.
fn delete<'a>(client: &'a Client, name: &'a str) -> ObjectFuture<'a> {
    delete_through(FasterMultiLock::whole_group(client, name))
}

inventory::submit! {
    KindInspection {
        name: "faster-multilock",
        article: "a",
        lock: true,
        main_type: "hash",
        derived: &[],
        derived_inside: &[],
        channel: Some(lock_channel),
        script: &INSPECT,
        read,
        force_unlock: Some(force_unlock),
        delete,
    }
}
