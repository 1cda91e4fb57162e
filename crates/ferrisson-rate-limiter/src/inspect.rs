//! What the rate limiter tells inspection of itself ([`KindInspection`]): `Client::inspect`,
//! `list_objects` and the `ferrisson` command-line tool learn the kind from this crate.

use std::time::Duration;

use ferrisson_core::__engine::{INSPECT_PRELUDE, Script, delete_through, inventory};
use ferrisson_core::{Client, KindFacts, KindInspection, ObjectFuture, ObjectInfo, RateState};

use crate::RateLimiter;

/// Reading a rate limiter's settings and overall window (`lua/inspect.lua`).
pub(crate) static INSPECT: Script = Script::with_prelude(
    "rate_limiter/inspect",
    &INSPECT_PRELUDE,
    include_str!("../lua/inspect.lua"),
);

/// The settings and the overall window as `RateState`.
fn read(facts: &KindFacts, info: &mut ObjectInfo) {
    let setting = |name: &str| {
        facts
            .all("field")
            .find(|row| row.first().is_some_and(|f| f == name))
            .and_then(|row| row.get(1)?.parse::<i64>().ok())
    };
    let rate = setting("rate");
    let interval = setting("interval").unwrap_or(0);
    let per_client = setting("type") == Some(1);
    let window = facts.all("window").next().unwrap_or_default();
    let at = |i: usize| window.get(i).map_or("", String::as_str);
    let (value, given, oldest) = (at(0), at(1).parse::<u64>().unwrap_or(0), at(2 + 1));
    // As of now: the stored value is as of the last call, and the permits given more than an
    // interval ago have come back since. Per client, each client has a window of its own.
    let available = (!per_client && !value.is_empty())
        .then(|| {
            rate.map(|rate| {
                rate.saturating_sub(i64::try_from(given).unwrap_or(i64::MAX))
                    .max(0)
            })
        })
        .flatten();
    let next_return_in = oldest
        .parse::<i64>()
        .ok()
        .map(|at| at.saturating_add(interval).to_string())
        .and_then(|at| facts.until(&at));
    info.rate = Some(RateState::new(
        rate.unwrap_or(0),
        Duration::from_millis(u64::try_from(interval).unwrap_or(0)),
        per_client,
        setting("keepAliveTime")
            .and_then(|ms| u64::try_from(ms).ok())
            .filter(|&ms| ms > 0)
            .map(Duration::from_millis),
        available,
        given,
        next_return_in,
    ));
}

/// The command-line tool's delete: the limiter's own.
fn delete<'a>(client: &'a Client, name: &'a str) -> ObjectFuture<'a> {
    delete_through(RateLimiter::new(client, name))
}

inventory::submit! {
    KindInspection {
        name: "rate-limiter",
        article: "a",
        lock: false,
        main_type: "hash",
        derived: &["value", "permits"],
        derived_inside: &[],
        channel: None,
        script: &INSPECT,
        read,
        force_unlock: None,
        delete,
    }
}
