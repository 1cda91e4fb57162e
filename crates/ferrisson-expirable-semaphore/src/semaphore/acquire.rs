//! One acquire call, as the core's permit engine drives it.

use super::*;

/// One acquire call: its id (the reservation's owner) and its tries.
/// One acquire call of the expirable semaphore, as the core's permit engine drives it: each
/// try makes fresh permit ids, which its undo gives back and its permits carry.
#[derive(Clone)]
pub(super) struct AcquireCall {
    pub(super) shared: Arc<Shared>,
    pub(super) lease: Option<Duration>,
    pub(super) limit: Option<u32>,
}

impl AcquireCall {
    pub(super) fn lease(&self) -> Duration {
        self.lease.unwrap_or(self.shared.client.config().lease())
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

impl PermitKind for AcquireCall {
    /// The try's id seed ([`permit_id`]): a call's memory and arguments do not grow with the
    /// permits it asks for.
    type Ticket = u128;
    type Taken = Vec<Permit>;

    fn kind_name(&self) -> &'static str {
        "expirable_semaphore"
    }

    fn names(&self) -> &SemaphoreNames {
        &self.shared.names
    }

    fn ticket(&self, _n: u32) -> u128 {
        self.shared.fresh_id_seed()
    }

    fn try_call(&self, args: &PermitTry<'_>, seed: &u128) -> ScriptCall {
        let shared = &self.shared;
        let client = &shared.client;
        // The ids are the try's record: only its sequence number (for the undone marks) and
        // a resend's flag go along; the rest only when needed (each argument costs Redis on
        // every call).
        let call = ScriptCall::new(&ACQUIRE, &[&shared.key])
            .arg(args.n)
            .arg(ferrisson_core::__engine::time::millis(self.lease()))
            .arg(client.config().publish_command().as_str())
            .arg(&seed.to_be_bytes()[..])
            .arg(shared.record.client_hex())
            .arg(args.call.seq)
            .arg(if args.resend { "r" } else { "" });
        let limit = || self.limit.map(|l| l.to_string()).unwrap_or_default();
        match (self.limit, args.reservation_ms) {
            (None, 0) => call,
            (_, 0) => call.arg(limit()),
            (_, ms) => call.arg(limit()).arg(ms).arg(args.waiter),
        }
    }

    fn undo_call(&self, args: &PermitTry<'_>, seed: &u128) -> ScriptCall {
        let shared = &self.shared;
        let call = ScriptCall::new(&UNDO_ACQUIRE, &[&shared.key])
            .arg(shared.client.config().publish_command().as_str())
            .arg(&seed.to_be_bytes()[..])
            .arg(args.n)
            .arg(shared.record.client_hex());
        args.call.undo_args(call, &shared.client)
    }

    fn taken(
        &self,
        args: &PermitTry<'_>,
        seed: u128,
        _reply: &[i64],
        sent_at: Instant,
    ) -> Vec<Permit> {
        let owner = self.shared.client.new_owner();
        let (lease, watched) = (self.lease(), self.lease.is_none());
        (0..args.n)
            .map(|i| {
                new_permit(
                    &self.shared,
                    permit_id(seed, i),
                    owner.clone(),
                    lease,
                    watched,
                    sent_at,
                )
            })
            .collect()
    }

    fn granted(&self, taken: Taken) -> Option<Vec<Permit>> {
        match taken {
            Taken::Permit { id, owner, lease } => {
                Some(vec![permit_of(&self.shared, id, owner, lease)])
            }
            Taken::Hold { .. } | Taken::Permits { .. } => None,
        }
    }
}
