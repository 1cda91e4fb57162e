//! Many values of one group locked all at once, in one Redis hash and one script call:
//! Redisson's `RFasterMultiLock` (`redisson.getFasterMultiLock(group, values)`), on its exact
//! layout and channel. Where a `MultiLock` over N locks costs N round trips, this costs one,
//! whatever N: lock every item of an order, every seat of a booking.
//!
//! ```no_run
//! # async fn demo() -> ferrisson_faster_multilock::Result<()> {
//! use ferrisson_faster_multilock::{Client, FasterMultiLock, Lock};
//!
//! let client = Client::connect("redis://127.0.0.1:6379").await?;
//! let order = FasterMultiLock::new(&client, "order:1042", ["item-1", "item-2", "item-3"])?;
//! let guard = order.lock().await?;
//! // item-1 is done: let others have it, keep the rest.
//! let guard = order.part(["item-1"])?.unlock(guard).await?;
//! if let Some(guard) = guard {
//!     guard.unlock().await?;
//! }
//! # Ok(()) }
//! ```
//!
//! - **All or nothing.** An acquisition takes every value, or waits (or fails) while another
//!   owner holds any of them; re-entry by the same [`Owner`] counts per value, as Redisson's.
//! - **The engine's lock.** The watchdog renews all the values of a hold in one call, the
//!   guard's loss signal tells the holder when any of them is lost (expired, force-unlocked),
//!   and `try_lock_with`, fixed leases, `extend` (which only moves a value's lease end later on
//!   the server, as Redisson's renewal does; the guard counts with the lease asked for),
//!   `force_unlock` (of the handle's values),
//!   `is_locked` (any of them held by anyone), `hold_count` and scoped use work as for every
//!   lock kind. No fencing: Redisson's layout has no counter for it.
//! - **Part of a hold** is unlocked with [`FasterMultiLock::part`] and [`Part::unlock`]; the
//!   guard of the values kept comes back.
//! - **Wake-ups.** A release tells the group's waiters which values it freed: a ferrisson waiter
//!   wakes only for a value it wants (each value is one of 52 bits of the message, so an
//!   unrelated value wakes it only when their bits collide), a Redisson waiter for any. A
//!   Redisson release names nothing, and wakes every ferrisson waiter of the group.
//! - **Limits.** At most [`MAX_VALUES`] distinct values per handle: every call of a hold names
//!   them all, and Redis runs nothing else meanwhile.
//! - **Cluster.** A group is one hash: its values live in one slot by construction.
//!
//! # Sharing a group with Redisson
//!
//! A value's field is Redisson's 128-bit HighwayHash of the value as `StringCodec` encodes it
//! ([`redisson_field`]): configure the Java side with `StringCodec` for a group it shares
//! (Redisson's default Kryo codec encodes values differently and is not supported). Leases end
//! by the server's clock here, by the JVM's clock in Redisson: a Java host whose clock is off
//! by some seconds sees ferrisson's leases end that much early or late.
//!
//! # Cancel safety
//!
//! As every lock kind's: a dropped `lock` future gives back what its last try may have taken,
//! a waiter holds nothing between tries, and a dropped guard releases its values in the
//! background.

mod faster;
mod inspect;

pub use faster::{FasterMultiLock, Group, MAX_VALUES, Part, redisson_field};
pub use ferrisson_core::{AcquireOptions, HoldGuard, Lock, SyncObject};
// What a user of this crate alone needs, without a dependency on `ferrisson-core`.
pub use ferrisson_core::{Client, ClientConfig, Error, LossReason, Owner, Result};

#[doc(hidden)]
/// Every script this crate runs.
pub fn scripts() -> [&'static ferrisson_core::__engine::Script; 7] {
    [
        &faster::PRELUDE,
        &faster::ACQUIRE,
        &faster::RELEASE,
        &faster::RENEW,
        &faster::STATE,
        &faster::FORCE,
        &inspect::INSPECT,
    ]
}
