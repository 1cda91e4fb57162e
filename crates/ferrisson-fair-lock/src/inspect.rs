//! What the fair lock tells inspection of itself ([`KindInspection`]): `Client::inspect`,
//! `list_objects` and the `ferrisson` command-line tool learn the kind from this crate.

use ferrisson_core::__engine::{
    INSPECT_PRELUDE, Script, delete_through, force_unlock_through, inventory, lock_channel,
};
use ferrisson_core::{Client, KindFacts, KindInspection, ObjectFuture, ObjectInfo, Waiter};

use crate::FairLock;

/// Reading a fair lock's holds and queue (`lua/inspect.lua`).
pub(crate) static INSPECT: Script = Script::with_prelude(
    "fair_lock/inspect",
    &INSPECT_PRELUDE,
    include_str!("../lua/inspect.lua"),
);

/// Each hold (under the hash's lease), sorted by owner, and each waiter in its place, with
/// the time left on its Redisson timeout and on its liveness deadline.
fn read(facts: &KindFacts, info: &mut ObjectInfo) {
    facts.exclusive_holders(info);
    info.queue_length = facts
        .number("queue_length")
        .and_then(|n| u64::try_from(n).ok())
        .unwrap_or(0);
    for (place, row) in facts.all("queued").enumerate() {
        let [owner, timeout, alive] = row else {
            continue;
        };
        let mut waiter = Waiter::new(owner.clone(), place, facts.until(alive));
        waiter.timeout_in = facts.until(timeout);
        info.waiters.push(waiter);
    }
}

/// The command-line tool's force unlock: the fair lock's own (its queue stays).
fn force_unlock<'a>(client: &'a Client, name: &'a str) -> ObjectFuture<'a> {
    force_unlock_through(FairLock::new(client, name))
}

/// The command-line tool's delete: the fair lock's own (its queue with it).
fn delete<'a>(client: &'a Client, name: &'a str) -> ObjectFuture<'a> {
    delete_through(FairLock::new(client, name))
}

inventory::submit! {
    KindInspection {
        name: "fair-lock",
        article: "a",
        lock: true,
        main_type: "hash",
        derived: &["alive"],
        derived_inside: &[],
        channel: Some(lock_channel),
        script: &INSPECT,
        read,
        force_unlock: Some(force_unlock),
        delete,
    }
}
