//! What the countdown latch tells inspection of itself ([`KindInspection`]): `Client::inspect`,
//! `list_objects` and the `ferrisson` command-line tool learn the kind from this crate.

use ferrisson_core::__engine::{INSPECT_PRELUDE, Script, delete_through, inventory};
use ferrisson_core::{Client, KindFacts, KindInspection, LatchState, ObjectFuture, ObjectInfo};

use crate::CountDownLatch;

/// Reading a latch's count and participants (`lua/inspect.lua`).
pub(crate) static INSPECT: Script = Script::with_prelude(
    "latch/inspect",
    &INSPECT_PRELUDE,
    include_str!("../lua/inspect.lua"),
);

/// The count (0: open) and the participants counted this round, sorted.
fn read(facts: &KindFacts, info: &mut ObjectInfo) {
    let mut participants: Vec<String> = facts
        .all("participant")
        .filter_map(|row| row.first().cloned())
        .collect();
    participants.sort();
    info.latch = Some(LatchState::new(
        facts.number("value").unwrap_or(0).max(0),
        facts
            .number("participants")
            .and_then(|n| u64::try_from(n).ok())
            .unwrap_or(0),
        participants,
    ));
}

/// The protocol's latch channel, `redisson_countdownlatch__channel__{<key>}`.
fn channel(key: &str) -> String {
    format!("redisson_countdownlatch__channel__{{{key}}}")
}

/// The command-line tool's delete: the latch's own, which releases every waiter.
fn delete<'a>(client: &'a Client, name: &'a str) -> ObjectFuture<'a> {
    delete_through(CountDownLatch::new(client, name))
}

inventory::submit! {
    KindInspection {
        name: "latch",
        article: "a",
        lock: false,
        main_type: "string",
        derived: &["round", "counted", "completed"],
        derived_inside: &[],
        channel: Some(channel),
        script: &INSPECT,
        read,
        force_unlock: None,
        delete,
    }
}
