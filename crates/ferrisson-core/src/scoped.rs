//! What scoped work gets of the hold it runs under ([`Hold`]): `lock.with(|hold| …)`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, LossReason, Result};
use crate::watchdog::LeaseWatch;

/// Where a [`Hold`] learns of its loss: one hold's lease, or a group of holds (a MultiLock's,
/// a RedLock's quorum). For the synchronizer crates; users meet it only through [`Hold`].
pub trait HoldWatch: Send + Sync + 'static {
    /// Why the hold was lost, or `None` while it is believed held.
    fn loss_reason(&self) -> Option<LossReason>;

    /// Resolves when the hold is lost, with the reason; borrows nothing.
    fn lost(&self) -> Pin<Box<dyn Future<Output = LossReason> + Send + 'static>>;
}

impl HoldWatch for LeaseWatch {
    fn loss_reason(&self) -> Option<LossReason> {
        self.lost_reason()
    }

    fn lost(&self) -> Pin<Box<dyn Future<Output = LossReason> + Send + 'static>> {
        Box::pin(self.lost_owned())
    }
}

/// The hold scoped work runs under, handed to it by `with` (`lock.with(|hold| async move {
/// … })`, and the same on the semaphores, MultiLock and RedLock): its fencing token, a check
/// to make before each step, and the loss signal to `select!` on. Cheap to clone; dropping it
/// releases nothing (the `with` call releases when the work ends).
///
/// ```
/// use ferrisson_core::{Hold, Result};
///
/// // Each write the work makes carries (token, sequence): the resource keeps the largest pair
/// // it accepted and refuses a smaller one, so a holder that lost the lock is refused.
/// async fn write_twice(hold: Hold) -> Result<()> {
///     for _ in 0..2 {
///         hold.ensure_held()?;
///         let Some((token, n)) = hold.stamp() else {
///             return Ok(()); // an unfenced lock: nothing to stamp
///         };
///         let _ = (token, n); // ... write, stamped ...
///     }
///     Ok(())
/// }
/// ```
#[derive(Clone)]
pub struct Hold {
    token: Option<u64>,
    /// The last sequence number [`stamp`](Self::stamp) gave, shared by clones.
    sequence: Arc<AtomicU64>,
    watch: Option<Arc<dyn HoldWatch>>,
}

impl std::fmt::Debug for Hold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hold")
            .field("token", &self.token)
            .field("lost", &self.loss_reason())
            .finish()
    }
}

impl Hold {
    /// A hold with fencing `token` (if any), which learns of its loss from `watch` (`None`: a
    /// hold without a lease, which is never lost, as a plain semaphore's permits).
    pub fn new(token: Option<u64>, watch: Option<Arc<dyn HoldWatch>>) -> Self {
        Self {
            token,
            sequence: Arc::new(AtomicU64::new(0)),
            watch,
        }
    }

    /// The fencing token of the acquisition (fenced locks, write locks; the largest of a
    /// group's): strictly greater than every earlier acquisition's. `None` for a kind without
    /// tokens.
    pub fn token(&self) -> Option<u64> {
        self.token
    }

    /// The token and the next number of a sequence that starts at 1 (shared by the hold's
    /// clones): the `(token, sequence)` pair to stamp each write with when the work makes
    /// several. A resource that keeps the largest pair it accepted (token first) refuses a
    /// stale holder's write, not this holder's next one. `None` without a token.
    pub fn stamp(&self) -> Option<(u64, u64)> {
        let token = self.token?;
        Some((token, self.sequence.fetch_add(1, Ordering::Relaxed) + 1))
    }

    /// Why the hold was lost, or `None` while it is held.
    pub fn loss_reason(&self) -> Option<LossReason> {
        self.watch.as_ref().and_then(|w| w.loss_reason())
    }

    /// Whether the hold was lost.
    pub fn is_lost(&self) -> bool {
        self.loss_reason().is_some()
    }

    /// `Ok(())` while the hold is believed held; [`Error::LeaseLost`] once it is lost: call it
    /// before each step that must run under the hold.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] with the reason.
    pub fn ensure_held(&self) -> Result<()> {
        Error::unless_lost(self.loss_reason())
    }

    /// Resolves when the hold is lost, with the reason (pending for as long as it is held,
    /// and for a hold that cannot be lost): the cancellation to `select!` on beside a step
    /// that must stop when the hold goes. It borrows nothing, so it can be moved into a task.
    /// (`with` itself cuts the whole work off at a loss; this is for work that must stop in
    /// a way of its own, say to roll back.)
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only observes.
    pub fn lost(&self) -> impl Future<Output = LossReason> + Send + 'static {
        let watch = self.watch.as_ref().map(|w| w.lost());
        async move {
            match watch {
                Some(lost) => lost.await,
                None => std::future::pending().await,
            }
        }
    }
}
