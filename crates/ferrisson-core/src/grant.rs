//! What a local releaser hands a waiter of its client instead of the waiter's own try
//! ([`Grant`]): what that try would have taken, as data the waiter's kind makes its guard of,
//! the same way it makes one of a try's reply. One type for every kind that hands off, so the
//! hub's slots, claims and wake-ups carry it as it is: nothing is boxed as `Any` or
//! downcast, and a waiter can only be claimed for what it takes ([`Takes`]).

use crate::owner::Owner;
use crate::watchdog::LeaseHandle;

/// What a waiter takes when handed over, and so which releasers may claim it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Takes {
    /// One hold of a lock, made for the waiter's owner ([`Taken::Hold`]).
    Hold,
    /// Permits of a semaphore as they are ([`Taken::Permits`]).
    Permits,
    /// One expirable permit, made for the waiter with its lease ([`Taken::Permit`]).
    Permit,
    /// Holds of several locks at once, made for the waiter's owner (a RedLock's: its
    /// instances' holds, [`Taken::Holds`]).
    Holds,
}

/// What a hand-off gave the waiter.
#[derive(Debug)]
pub enum Taken {
    /// One hold of a lock, for `owner`, registered with the watchdog, and its fencing token
    /// where the lock has one.
    Hold {
        /// Whose hold it is (the waiter's owner).
        owner: Owner,
        /// The hold's registration with the watchdog.
        lease: LeaseHandle,
        /// The fencing token the hand-off took.
        token: Option<u64>,
    },
    /// `count` permits, taken in the count's `epoch` (`None`: unknown).
    Permits {
        /// How many.
        count: u32,
        /// The count's epoch when they were taken.
        epoch: Option<i64>,
    },
    /// One expirable permit under `id`, registered with the watchdog for `owner`.
    Permit {
        /// The permit's id.
        id: String,
        /// The waiter's owner.
        owner: Owner,
        /// The permit's registration with the watchdog.
        lease: LeaseHandle,
    },
    /// A hold of each of several locks (a RedLock's instances), each a [`Taken::Hold`] for
    /// the waiter's owner, by the lock's place in the group the waiter and the releaser share.
    Holds {
        /// Each lock's place in the group, and its hold.
        holds: Vec<(usize, Taken)>,
        /// When the releases that made them began: a fixed lease runs from no later.
        since: tokio::time::Instant,
    },
    /// `count` permits an acquire's own try took under the ids its `seed` makes
    /// (`PermitsMade::Seeded`), the call having been sent at `sent_at`. Never handed off.
    Seeded {
        /// The try's id seed.
        seed: u128,
        /// How many.
        count: u32,
        /// When the try was sent: the permits' leases run from then.
        sent_at: tokio::time::Instant,
    },
}

impl Taken {
    /// Which waiters take this.
    pub fn takes(&self) -> Takes {
        match self {
            Self::Hold { .. } => Takes::Hold,
            Self::Permits { .. } => Takes::Permits,
            Self::Permit { .. } | Self::Seeded { .. } => Takes::Permit,
            Self::Holds { .. } => Takes::Holds,
        }
    }
}

/// A hand-off on its way: what was taken for the waiter, and how to give it back if nobody
/// accepts it. Dropped unaccepted (the waiter left before it looked, or the delivery found it
/// gone and the releaser dropped what came back), it runs its undo, which releases what was
/// taken, once. One allocation, what was taken and its undo together: it passes through the
/// hub's slots and results by value.
pub struct Grant(Box<dyn Handed>);

impl std::fmt::Debug for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grant")
            .field("taken", self.0.taken())
            .finish_non_exhaustive()
    }
}

/// What a grant holds: what was taken, and its undo.
trait Handed: Send {
    fn taken(&self) -> &Taken;
    /// What was taken, the undo dropped unrun.
    fn accept(self: Box<Self>) -> Taken;
}

struct Pending<U: FnOnce(Taken) + Send> {
    taken: Taken,
    undo: Option<U>,
}

impl<U: FnOnce(Taken) + Send> Handed for Pending<U> {
    fn taken(&self) -> &Taken {
        &self.taken
    }

    fn accept(mut self: Box<Self>) -> Taken {
        self.undo = None;
        std::mem::replace(&mut self.taken, NOTHING)
    }
}

impl<U: FnOnce(Taken) + Send> Drop for Pending<U> {
    fn drop(&mut self) {
        if let Some(undo) = self.undo.take() {
            undo(std::mem::replace(&mut self.taken, NOTHING));
        }
    }
}

impl Grant {
    /// `taken`, given back by `undo` unless accepted.
    pub fn new(taken: Taken, undo: impl FnOnce(Taken) + Send + 'static) -> Self {
        Self(Box::new(Pending {
            taken,
            undo: Some(undo),
        }))
    }

    /// Which waiters take it.
    pub fn takes(&self) -> Takes {
        self.0.taken().takes()
    }

    /// Takes what was handed over: from now on it is the caller's to keep or release.
    pub fn accept(self) -> Taken {
        self.0.accept()
    }
}

/// What is left in a grant whose contents were taken out: nothing to give back.
const NOTHING: Taken = Taken::Permits {
    count: 0,
    epoch: None,
};
