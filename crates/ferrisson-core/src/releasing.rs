//! Releases in flight, per owner: an owner's next acquire is not sent while a release of that
//! owner may still be resent.
//!
//! # Why
//!
//! A release records its result in the client's record on the lock (`core/release_prelude`),
//! which Redis loses with the lock in a restart or a failover. A resend after a lost reply that
//! finds no record and its owner holding the lock must take that hold for its own, so if the
//! same owner had
//! taken the lock again in between, the resend would free that new hold and its holder would
//! go on without it. Hence the rule: while a release of an owner is in flight (sent and not
//! settled, or being resent in the background), acquire tries of that owner wait
//! ([`Releasing::settled`]). Owners are fresh per acquisition unless a handle is bound to one,
//! so the wait only ever happens for a bound owner that acquires while its own release is
//! outstanding, or for a waiter whose abandoned try is being released behind it (the same
//! hazard, with any lock kind: a release that found nothing records nothing either).
//!
//! An owner is the key (not owner and lock): an owner released on one lock and acquiring
//! another waits too, for as long as the release takes, which keeps the table to one lookup.
//!
use std::sync::{Arc, Mutex, MutexGuard};

use rustc_hash::FxHashMap;
use tokio::sync::Notify;

use crate::owner::Owner;

/// The releases in flight of one client.
#[derive(Default)]
pub(crate) struct Releasing {
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    /// By owner: what its acquire tries wait for.
    owners: FxHashMap<Owner, Pending>,
}

#[derive(Default)]
struct Pending {
    /// Releases of the owner in flight.
    count: u32,
    /// Made by the first acquire that waits for them; woken when the count reaches 0.
    settled: Option<Arc<Notify>>,
}

impl Releasing {
    fn table(&self) -> MutexGuard<'_, Table> {
        // A panic elsewhere with the lock held leaves a table that is still consistent: no
        // change to it can panic half-way.
        self.table
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Marks a release of `owner` in flight until the mark is dropped.
    pub(crate) fn start(self: &Arc<Self>, owner: &Owner) -> ReleaseMark {
        self.table().owners.entry(owner.clone()).or_default().count += 1;
        ReleaseMark {
            releasing: self.clone(),
            owner: owner.clone(),
        }
    }

    /// Waits until no release of `owner` is in flight (at once when none is).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it changes nothing but the waker list of a notification.
    pub(crate) async fn settled(&self, owner: &Owner) {
        loop {
            let notify = {
                let mut table = self.table();
                let Some(pending) = table.owners.get_mut(owner) else {
                    return;
                };
                pending
                    .settled
                    .get_or_insert_with(|| Arc::new(Notify::new()))
                    .clone()
            };
            let notified = notify.notified();
            let mut notified = std::pin::pin!(notified);
            // Registered, then checked again: a mark dropped in between still wakes this wait.
            notified.as_mut().enable();
            if !self.table().owners.contains_key(owner) {
                return;
            }
            notified.await;
        }
    }

    #[cfg(test)]
    fn in_flight(&self, owner: &Owner) -> u32 {
        self.table().owners.get(owner).map_or(0, |p| p.count)
    }
}

/// A release in flight
/// (`Client::release_started`); dropping
/// it ends it.
pub struct ReleaseMark {
    releasing: Arc<Releasing>,
    owner: Owner,
}

impl Drop for ReleaseMark {
    fn drop(&mut self) {
        let mut table = self.releasing.table();
        let Some(pending) = table.owners.get_mut(&self.owner) else {
            return;
        };
        pending.count = pending.count.saturating_sub(1);
        if pending.count == 0
            && let Some(pending) = table.owners.remove(&self.owner)
            && let Some(settled) = pending.settled
        {
            drop(table);
            settled.notify_waiters();
        }
    }
}

impl std::fmt::Debug for ReleaseMark {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReleaseMark")
            .field("owner", &self.owner)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn owner(n: u64) -> Owner {
        Owner::compose("00000000-0000-4000-8000-000000000000", n)
    }

    #[tokio::test]
    async fn an_owner_without_releases_in_flight_goes_at_once() {
        let releasing = Arc::new(Releasing::default());
        let _other = releasing.start(&owner(2));
        tokio::time::timeout(Duration::from_secs(5), releasing.settled(&owner(1)))
            .await
            .expect("no release of this owner is in flight");
    }

    #[tokio::test]
    async fn an_acquire_waits_for_every_release_of_its_owner() {
        let releasing = Arc::new(Releasing::default());
        let first = releasing.start(&owner(1));
        let second = releasing.start(&owner(1));
        assert_eq!(releasing.in_flight(&owner(1)), 2);
        let waiter = tokio::spawn({
            let releasing = releasing.clone();
            async move { releasing.settled(&owner(1)).await }
        });
        drop(first);
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "one release is still in flight");
        drop(second);
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("woken when the last release settles")
            .expect("the waiter ran");
        assert_eq!(releasing.in_flight(&owner(1)), 0);
        let table = releasing.table();
        assert!(table.owners.is_empty(), "settled owners leave the table");
    }
}
