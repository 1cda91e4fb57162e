//! What the spin lock tells inspection of itself ([`KindInspection`]): `Client::inspect`,
//! `list_objects` and the `ferrisson` command-line tool learn the kind from this crate.

use ferrisson_core::__engine::{
    INSPECT_PRELUDE, Script, delete_through, force_unlock_through, inventory, lock_channel,
};
use ferrisson_core::{Client, KindFacts, KindInspection, ObjectFuture, ObjectInfo, Waiter};

use crate::SpinLock;

/// Reading a spin lock's holds and its next-in-line reservation (`lua/inspect.lua`).
pub(crate) static INSPECT: Script = Script::with_prelude(
    "spin_lock/inspect",
    &INSPECT_PRELUDE,
    include_str!("../lua/inspect.lua"),
);

/// Each hold (under the hash's lease), sorted by owner, the fencing counter, and the waiter
/// that holds the next-in-line reservation (`<since>|<at>|<owner>`), first in line for as long
/// as the reservation lasts.
fn read(facts: &KindFacts, info: &mut ObjectInfo) {
    facts.exclusive_holders(info);
    info.fencing_token = facts.fencing_token();
    if let Some([value, pttl]) = facts.all("reserved").next()
        && let Some(owner) = value.splitn(3, '|').nth(2)
    {
        info.waiters
            .push(Waiter::new(owner.to_owned(), 0, facts.duration(pttl)));
    }
}

/// The command-line tool's force unlock: the spin lock's own.
fn force_unlock<'a>(client: &'a Client, name: &'a str) -> ObjectFuture<'a> {
    force_unlock_through(SpinLock::new(client, name))
}

/// The command-line tool's delete: the spin lock's own (its reservation with it).
fn delete<'a>(client: &'a Client, name: &'a str) -> ObjectFuture<'a> {
    delete_through(SpinLock::new(client, name))
}

inventory::submit! {
    KindInspection {
        name: "spin-lock",
        article: "a",
        lock: true,
        main_type: "hash",
        derived: &["next"],
        derived_inside: &[],
        channel: Some(lock_channel),
        script: &INSPECT,
        read,
        force_unlock: Some(force_unlock),
        delete,
    }
}
