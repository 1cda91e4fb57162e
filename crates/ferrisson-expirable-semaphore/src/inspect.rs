//! What the permit-expirable semaphore tells inspection of itself ([`KindInspection`]):
//! `Client::inspect`, `list_objects` and the `ferrisson` command-line tool learn the kind from
//! this crate.

use std::time::Duration;

use ferrisson_core::__engine::{INSPECT_PRELUDE, Script, delete_through, inventory};
use ferrisson_core::{
    Client, KindFacts, KindInspection, ObjectFuture, ObjectInfo, PermitState, TakenPermit,
};

use crate::ExpirableSemaphore;

/// Reading an expirable semaphore's count and taken permits (`lua/inspect.lua`).
pub(crate) static INSPECT: Script = Script::with_prelude(
    "expirable_semaphore/inspect",
    &INSPECT_PRELUDE,
    include_str!("../lua/inspect.lua"),
);

/// Redisson's score of a permit taken without a lease.
const NO_LEASE_SCORE: u64 = 922_337_203_685_477;

/// The permits: free ones (expired permits not yet returned count as free: an acquire takes
/// them back), those taken with their leases, and a large waiter's reservation. Certain when
/// taken permits stand beside the count (else a bare count, which a semaphore's could be).
fn read(facts: &KindFacts, info: &mut ObjectInfo) {
    let count = facts.number("value").unwrap_or(0);
    let taken = facts.all("permits_taken").next().map(|row| {
        let n = |i: usize| row.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        (n(0), n(1))
    });
    info.kind_certain = taken.is_some();
    let (live, expired) = taken.unwrap_or((0, 0));
    let permits = facts
        .all("permit")
        .filter_map(|row| {
            let [id, expiry] = row else { return None };
            // The server frees a permit once its clock, floored to the ms, reaches the expiry;
            // `now` is floored the same way, so up to a millisecond behind: the lease left is
            // at most `expiry - now - 1` ms, never more (expiries are stored a millisecond
            // late for the same reason: protocol.md, "the extra millisecond").
            let lease_left = match expiry.parse::<u64>() {
                Ok(NO_LEASE_SCORE) => None,
                _ => facts
                    .until(expiry)
                    .map(|l| l.saturating_sub(Duration::from_millis(1))),
            };
            Some(TakenPermit::new(id.clone(), lease_left))
        })
        .collect();
    let reserved_for = facts.all("reservation").next().and_then(|row| {
        let [value, pttl] = row else { return None };
        Some((value.clone(), facts.duration(pttl)?))
    });
    info.permits = Some(PermitState::new(
        count.saturating_add(i64::try_from(expired).unwrap_or(0)),
        Some(live),
        permits,
        reserved_for,
    ));
}

/// The protocol's semaphore channel, `redisson_sc:{<key>}`.
fn channel(key: &str) -> String {
    ferrisson_core::__engine::keys::prefixed("redisson_sc", key)
}

/// The command-line tool's delete: the semaphore's own (count and taken permits).
fn delete<'a>(client: &'a Client, name: &'a str) -> ObjectFuture<'a> {
    delete_through(ExpirableSemaphore::new(client, name))
}

inventory::submit! {
    KindInspection {
        name: "expirable-semaphore",
        article: "an",
        lock: false,
        main_type: "string",
        derived: &[],
        derived_inside: &[],
        channel: Some(channel),
        script: &INSPECT,
        read,
        force_unlock: None,
        delete,
    }
}
