//! One acquire call, as the core's permit engine drives it.

use super::*;

/// The expirable semaphore's kind, as the core's permit engine takes it: its scripts and their
/// arguments, and what a try takes (permits under ids made from the try's seed, which its undo
/// gives back and its permits carry). The engine builds each try's calls from this and never
/// calls back into this crate.
pub(super) static SCRIPTS: PermitScripts = PermitScripts {
    kind: "expirable_semaphore",
    acquire: &ACQUIRE,
    // The ids are the try's record: only its sequence number (for the undone marks) and a
    // resend's flag go along.
    acquire_args: &[
        PermitArg::Count,
        PermitArg::Lease,
        PermitArg::Publish,
        PermitArg::Seed,
        PermitArg::Client,
        PermitArg::Sequence,
    ],
    undo: &UNDO_ACQUIRE,
    undo_args: &[
        PermitArg::Publish,
        PermitArg::Seed,
        PermitArg::Count,
        PermitArg::Client,
    ],
    made: PermitsMade::Seeded,
};

/// The permits of what an acquire got ([`take`]): the ids its own try took
/// ([`Taken::Seeded`]), or the one permit a local releaser handed over ([`Taken::Permit`]).
/// `lease`: the lease the call asked for (`None`: the client's, renewed by the watchdog).
pub(super) fn permits_of(
    shared: &Arc<Shared>,
    taken: Taken,
    lease: Option<Duration>,
) -> Option<Vec<Permit>> {
    match taken {
        Taken::Seeded {
            seed,
            count,
            sent_at,
        } => {
            let owner = shared.client.new_owner();
            let watched = lease.is_none();
            let lease = lease.unwrap_or(shared.client.config().lease());
            Some(
                (0..count)
                    .map(|i| {
                        new_permit(
                            shared,
                            permit_id(seed, i),
                            owner.clone(),
                            lease,
                            watched,
                            sent_at,
                        )
                    })
                    .collect(),
            )
        }
        Taken::Permit { id, owner, lease } => Some(vec![permit_of(shared, id, owner, lease)]),
        Taken::Hold { .. } | Taken::Permits { .. } | Taken::Holds { .. } => None,
    }
}

/// The id of permit `i` (0-based) of a try whose id seed is `seed`: the seed's first 12 bytes,
/// then its last 4 as a big-endian number plus `i` (mod 2^32), as `expirable_semaphore/acquire`
/// makes them.
pub(super) fn permit_id(seed: u128, i: u32) -> String {
    // The low 32 bits of the number are the last 4 bytes of its big-endian form.
    let low = u32::try_from(seed & 0xffff_ffff)
        .unwrap_or(0)
        .wrapping_add(i);
    format!("{:032x}", (seed & !0xffff_ffff) | u128::from(low))
}
