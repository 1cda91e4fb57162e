//! The release every lock kind runs on: its record, resend after a lost reply, local hand-off.

use crate::client::Client;
use crate::client::ClientEngine;
use crate::error::{Error, Result};
use crate::grant::{Grant, Taken};
use crate::guard::{CleanupGuard, HoldGuard, Release, Released};
use crate::owner::Owner;
use crate::pubsub::{MAX_HANDOFF_STREAK, Takes};
use crate::releasing::ReleaseMark;
use crate::watchdog::{LeaseEnd, LeaseSpec};
use futures::future::BoxFuture;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tracing::Instrument;

use super::*;

/// Releases one hold of `owner`, handing the lock to a local waiter when `handoff` allows and
/// the kind [hands off](HoldKind::hands_off) (then it builds that waiter's guard and delivers
/// it). Resent under one slot and sequence number of the client's record, so a resend after a
/// lost reply cannot release twice.
/// While the release may still be sent, acquire tries of `owner` wait
/// (`Client::releases_settled`); the release keeps its slot in the client's record on the
/// lock ([`ReleaseArgs::record`]) until then, so that a resend always finds what its lost call
/// recorded.
///
/// # Cancel safety
///
/// Dropped while the call is in flight (or left unknown), it sends the release again in the
/// background with the same record slot and number, and undoes a hand-off it could not deliver.
///
/// # Errors
///
/// [`Error::Unreachable`] when Redis cannot be reached, [`Error::Protocol`] for a reply of no known
/// shape.
pub fn release<'a, K: HoldKind>(
    kind: &'a Arc<K>,
    owner: &'a Owner,
    renew_lease: Option<Duration>,
    handoff: bool,
) -> impl std::future::Future<Output = Result<Released>> + Send + 'a {
    // In flight from the call on (not from the first poll: an acquire of the owner made right
    // after this call waits for it), until the outcome is known, the background resend
    // included (it takes the mark along).
    let mark = kind.client().release_started(owner);
    release_marked(kind, owner, renew_lease, handoff, mark)
}

/// [`release`], marked in flight already, in its span.
fn release_marked<'a, K: HoldKind>(
    kind: &'a Arc<K>,
    owner: &'a Owner,
    renew_lease: Option<Duration>,
    handoff: bool,
    mark: ReleaseMark,
) -> impl std::future::Future<Output = Result<Released>> + Send + 'a {
    let span = release_span(&**kind, owner);
    async move {
        release_inner(kind, owner, renew_lease, handoff, None, mark)
            .await
            .map(|(released, _)| released)
    }
    .instrument(span)
}

/// Releases the last hold of `owner`, handing the lock in the same script call to a fresh
/// owner of the same client with `lease` (`None`: kept by the watchdog), and returns that
/// owner's guard; `None` when nothing was handed (the kind does not hand off, or the hold was
/// not the last one: it was released as [`release`] does). What a caller that waits for a
/// lock in a way of its own (a RedLock's waiters, which take every instance at once) uses to
/// pass the lock on in one round trip.
///
/// # Cancel safety
///
/// As [`release`]'s: dropped while the call may have run, it is sent again in the background
/// with the same record slot and number, and a hand-off whose guard was never returned is undone.
///
/// # Errors
///
/// As [`release`]'s.
fn release_to_new_owner<K: HoldKind>(
    kind: Arc<K>,
    owner: Owner,
    end: LeaseEnd,
    lease: Option<Duration>,
) -> BoxFuture<'static, Result<(Released, Option<HoldGuard>)>> {
    let renew_lease =
        (end.renewed && kind.renews_on_release()).then(|| kind.client().config().lease());
    let mark = kind.client().release_started(&owner);
    Box::pin(async move {
        let direct = (end.lost.is_none() && end.last_hold && kind.hands_off())
            .then(|| successor(kind.client(), kind.client().new_owner(), lease));
        let span = release_span(&*kind, &owner);
        release_inner(&kind, &owner, renew_lease, false, direct, mark)
            .instrument(span)
            .await
    })
}

/// The span of one release of `owner`.
fn release_span<K: HoldKind>(kind: &K, owner: &Owner) -> tracing::Span {
    tracing::debug_span!(
        "ferrisson.release",
        kind = kind.kind_name(),
        key = %kind.lock_key(),
        %owner,
    )
}

/// A hand-off's successor: its owner, its lease (the fixed one asked for, else the client's)
/// and whether the watchdog keeps it (no fixed lease).
fn successor(client: &Client, owner: Owner, lease: Option<Duration>) -> (Owner, Duration, bool) {
    match lease {
        Some(lease) => (owner, lease, false),
        None => (owner, client.config().lease(), true),
    }
}

/// `handoff`: a local waiter may be claimed for the lock; `direct`: the successor is this one
/// (owner, lease, watched) instead, and its guard is returned rather than delivered.
async fn release_inner<K: HoldKind>(
    kind: &Arc<K>,
    owner: &Owner,
    renew_lease: Option<Duration>,
    handoff: bool,
    direct: Option<(Owner, Duration, bool)>,
    mark: ReleaseMark,
) -> Result<(Released, Option<HoldGuard>)> {
    let client = kind.client();
    let turns = handoff && direct.is_none() && kind.hands_off();
    let channel = turns.then(|| kind.waiting(owner).channel);
    let claim = channel
        .as_deref()
        .and_then(|channel| client.claim_turn(channel, Takes::Hold, MAX_HANDOFF_STREAK));
    // The claimed waiter: its owner, the lease it asked for, and whether it is watched.
    let successor: Option<(Owner, Duration, bool)> = direct.or_else(|| {
        claim.as_ref().and_then(|c| {
            let need = c.need();
            let owner = need.owner.clone()?;
            Some(successor(client, owner, need.lease))
        })
    });
    // Until the hand-off's outcome is settled (its reply read and the grant delivered, or, the
    // call abandoned, its resend read and a hand-off nobody was told of undone), the
    // successor's own tries wait: a try whose reply is lost resolves by reading its owner's
    // count, and would count the handed hold as its own, which the undo then frees under it.
    // One mark for this call, one for its resend.
    let handing = || {
        successor
            .as_ref()
            .map(|(owner, _, _)| client.release_started(owner))
    };
    let (_handing, handing_resend) = (handing(), handing());
    let local_waiters = channel
        .as_deref()
        .is_some_and(|channel| client.hub().has_waiters(channel));
    let stamp = Stamp {
        local_waiters,
        // The release's slot stays taken until the release has settled, resends included.
        record: kind.record().map(|record| Arc::new(record.start(client))),
    };
    // Dropped while the call may have run (or left unknown), the release is sent again with
    // the same record slot and number (counted once), and a hand-off to a waiter that was never told is
    // undone.
    let resend = CleanupGuard::new(client, || {
        let (kind, owner) = (kind.clone(), owner.clone());
        let successor = successor.as_ref().map(|(o, _, _)| o.clone());
        let stamp = stamp.clone();
        async move {
            let (_mark, _handing) = (mark, handing_resend);
            let resent = release_call(&*kind, &owner, renew_lease, None, &stamp, true).await;
            let undo = match resent {
                Ok(ReleaseReply::HandedOff { .. }) => successor,
                Ok(_) => None,
                Err(e) => {
                    tracing::warn!(key = %kind.lock_key(), %owner, error = %e, "resending an abandoned release failed; the hold ends with its lease");
                    None
                }
            };
            if let Some(successor) = undo
                && let Err(e) = release_boxed(&kind, &successor).await
            {
                tracing::warn!(key = %kind.lock_key(), %successor, error = %e, "undoing an abandoned hand-off failed; the hold ends with its lease");
            }
        }
    });
    let sent_at = Instant::now();
    let reply = release_call(
        &**kind,
        owner,
        renew_lease,
        successor.as_ref().map(|(o, lease, _)| (o, *lease)),
        &stamp,
        false,
    )
    .await;
    // Still unknown after the settle window: send it again in the background.
    resend.settle(&reply);
    if let Some(channel) = &channel
        && claim.is_none()
    {
        // A public release (or none): if it ended the client's turn, the other subscribers
        // its message reached take theirs first.
        let subscribers = match &reply {
            Ok(ReleaseReply::Freed { subscribers }) => *subscribers,
            _ => 0,
        };
        client.hub().end_turn(channel, subscribers);
    }
    match reply? {
        ReleaseReply::NotOwner => Ok((Released::NotOwner, None)),
        ReleaseReply::StillHeld => Ok((Released::StillHeld, None)),
        ReleaseReply::Freed { subscribers } => Ok((Released::Freed { subscribers }, None)),
        ReleaseReply::HandedOff { token } => {
            let Some((successor_owner, lease, renew)) = successor else {
                return Err(Error::Protocol(format!(
                    "the release script of `{}` handed off without a successor",
                    kind.lock_key()
                )));
            };
            let handle = client.hold_lease(LeaseSpec {
                script: kind.renew_script(),
                key: kind.lock_key().clone(),
                owner: kind.hold_field(&successor_owner),
                lease,
                renew,
                sent_at,
            });
            let token = kind.fenced().then_some(token);
            crate::metrics::handed_off(kind.kind_name());
            let Some(claim) = claim else {
                tracing::debug!(key = %kind.lock_key(), "released straight to a new owner");
                let guard = HoldGuard::new(kind.clone(), successor_owner, handle, token);
                return Ok((Released::HandedOff, Some(guard)));
            };
            let taken = Taken::Hold {
                owner: successor_owner,
                lease: handle,
                token,
            };
            // Never accepted (the waiter left meanwhile), the hold is made a guard and
            // dropped, which releases the lock.
            let undo_kind: Arc<dyn crate::guard::Release> = kind.clone();
            let grant = Grant::new(taken, move |taken| drop(hold_of(undo_kind, taken)));
            if let Err(unclaimed) = claim.deliver(grant) {
                drop(unclaimed);
            }
            tracing::debug!(key = %kind.lock_key(), "released straight to a local waiter");
            Ok((Released::HandedOff, None))
        }
    }
}

/// Undoes the acquire try `seq` of `owner`, whose caller left while the try may have run or
/// may still reach Redis (a copy of it held up on a connection the client gave up on): the try
/// is sent once more as a resend, which marks it in the client's undone marks on the lock, so
/// that no copy of it reaching Redis later takes anything (`late_copy`), and which tells
/// whether a copy took a hold (or takes one itself, the lock being free); that one hold is then
/// released. A hold `owner` had before the try is never released instead, as a release alone
/// would when the try never ran. Marked in flight from the start: `owner`'s next try waits for
/// it. What [`try_once`]'s cleanup runs.
pub(super) fn undo_try_boxed<K: HoldKind>(
    kind: &Arc<K>,
    owner: &Owner,
    seq: u64,
) -> BoxFuture<'static, Result<()>> {
    let mark = kind.client().release_started(owner);
    let (kind, owner) = (kind.clone(), owner.clone());
    Box::pin(async move {
        let client = kind.client();
        let believed = lease_state(&*kind, &kind.hold_field(&owner)).map_or(0, |s| s.holds);
        let lease = client.config().lease();
        let (reply, _synced): (redis::Value, Result<()>) = client
            .settle(|_| {
                let call = kind.try_call(&TryArgs {
                    owner: &owner,
                    lease,
                    believed,
                    retry: true,
                    seq,
                    wait: false,
                    wait_limit: Some(Duration::ZERO),
                    subscribed: false,
                    waited: Duration::ZERO,
                    track: None,
                });
                async move { client.eval_once_synced(&call).await }
            })
            .await?;
        if let Ok(TryReply::Taken { .. }) = kind.read_try(&owner, &reply) {
            release_marked(&kind, &owner, None, false, mark).await?;
        }
        Ok(())
    })
}

/// Releases one hold of `owner` without a hand-off, as a boxed future: what the cleanup
/// inside [`release`] calls for a hand-off nobody took (the box ends the recursion).
pub(super) fn release_boxed<K: HoldKind>(
    kind: &Arc<K>,
    owner: &Owner,
) -> BoxFuture<'static, Result<Released>> {
    let mark = kind.client().release_started(owner);
    let (kind, owner) = (kind.clone(), owner.clone());
    Box::pin(async move { release_marked(&kind, &owner, None, false, mark).await })
}

/// What identifies one release and its resends to the script: its slot and sequence number in
/// the client's record on the lock.
#[derive(Debug, Clone)]
struct Stamp {
    /// Whether waiters of the client wait on the kind's channel ([`ReleaseArgs::local_waiters`]).
    local_waiters: bool,
    record: Option<Arc<crate::record::RecordedCall>>,
}

/// One release script call (settled, its retries marked as such; `resend`: the first one too)
/// under its stamp, its reply read by the kind.
async fn release_call<K: HoldKind>(
    kind: &K,
    owner: &Owner,
    renew_lease: Option<Duration>,
    successor: Option<(&Owner, Duration)>,
    stamp: &Stamp,
    resend: bool,
) -> Result<ReleaseReply> {
    let call = |retry| {
        kind.release_call(&ReleaseArgs {
            owner,
            renew_lease,
            successor,
            record: stamp.record.as_deref(),
            retry,
            local_waiters: stamp.local_waiters,
        })
    };
    let reply: redis::Value = kind.client().eval_each(|n| call(resend || n > 0)).await?;
    kind.read_release(&reply)
}

/// A kind's guards release through the engine.
impl<K: HoldKind> Release for K {
    fn key(&self) -> &str {
        self.lock_key()
    }

    fn metric_kind(&self) -> &'static str {
        HoldKind::kind_name(self)
    }

    fn runs_on(&self) -> &Client {
        self.client()
    }

    fn release(
        self: Arc<Self>,
        owner: Owner,
        end: LeaseEnd,
    ) -> BoxFuture<'static, Result<Released>> {
        let renew_lease =
            (end.renewed && self.renews_on_release()).then(|| self.client().config().lease());
        // Only the last local hold of a live lock can go straight to a local waiter.
        let handoff = end.lost.is_none() && end.last_hold;
        let mark = self.client().release_started(&owner);
        Box::pin(async move { release_marked(&self, &owner, renew_lease, handoff, mark).await })
    }

    fn release_to_new_owner(
        self: Arc<Self>,
        owner: Owner,
        end: LeaseEnd,
        lease: Option<Duration>,
    ) -> BoxFuture<'static, Result<(Released, Option<HoldGuard>)>> {
        release_to_new_owner(self, owner, end, lease)
    }

    /// The kind's renewal script on this one hold ("extend if mine"), settled when its reply
    /// is lost (it is idempotent).
    fn extend(self: Arc<Self>, owner: Owner, lease: Duration) -> BoxFuture<'static, Result<bool>> {
        Box::pin(async move {
            let field = self.hold_field(&owner);
            let call = ScriptCall::new(self.renew_script(), &[self.lock_key()])
                .arg(crate::time::millis(lease))
                .arg(&*field);
            let renewed: Vec<i64> = self.client().eval(&call).await?;
            Ok(renewed.first() == Some(&1))
        })
    }
}

/// The guard of a hold a local releaser handed over ([`Taken::Hold`]) on `lock`; `None` for
/// anything else (a claim never delivers it: `Claim::deliver` checks what the waiter takes).
pub(crate) fn hold_of(lock: Arc<dyn crate::guard::Release>, taken: Taken) -> Option<HoldGuard> {
    crate::guard::HoldLock::new(lock).adopt(taken)
}
