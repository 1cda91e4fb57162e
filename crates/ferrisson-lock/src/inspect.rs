//! What the lean mutex tells inspection of itself ([`KindInspection`]): `Client::inspect`,
//! `list_objects` and the `ferrisson` command-line tool learn the kind from this crate.

use ferrisson_core::__engine::identity::client_tag;
use ferrisson_core::__engine::{
    INSPECT_PRELUDE, Script, delete_through, force_unlock_through, inventory,
};
use ferrisson_core::{
    Client, HoldMode, Holder, KindFacts, KindInspection, ObjectFuture, ObjectInfo,
};

use crate::Mutex;

/// Reading a mutex's holder and fencing counter (`lua/mutex_inspect.lua`).
pub(crate) static MUTEX_INSPECT: Script = Script::with_prelude(
    "lock/mutex_inspect",
    &INSPECT_PRELUDE,
    include_str!("../lua/mutex_inspect.lua"),
);

/// The holder (the token the key holds) and the fencing counter. A string of any content
/// could be a mutex: the kind is certain when the token names a ferrisson or Redisson client,
/// or a fencing counter stands beside it.
fn read(facts: &KindFacts, info: &mut ObjectInfo) {
    let token = facts.fencing_token();
    if let Some(owner) = facts.value("value") {
        info.kind_certain = client_tag(owner).is_some() || token.is_some();
        info.holders.push(Holder::new(
            owner.to_owned(),
            HoldMode::Exclusive,
            1,
            info.ttl,
        ));
    }
    info.fencing_token = token;
}

/// The mutex's release channel, `prefixed("ferrisson_mutex__channel", key)`.
fn channel(key: &str) -> String {
    ferrisson_core::__engine::keys::prefixed("ferrisson_mutex__channel", key)
}

/// The command-line tool's force unlock: the mutex's own.
fn force_unlock<'a>(client: &'a Client, name: &'a str) -> ObjectFuture<'a> {
    force_unlock_through(Mutex::new(client, name))
}

/// The command-line tool's delete: the mutex's own.
fn delete<'a>(client: &'a Client, name: &'a str) -> ObjectFuture<'a> {
    delete_through(Mutex::new(client, name))
}

inventory::submit! {
    KindInspection {
        name: "mutex",
        article: "a",
        lock: true,
        main_type: "string",
        derived: &[],
        derived_inside: &[],
        channel: Some(channel),
        script: &MUTEX_INSPECT,
        read,
        force_unlock: Some(force_unlock),
        delete,
    }
}
