//! The lock crate's scripts: the reentrant lock runs the hash-lock scripts of `ferrisson_core`
//! (`lua/core/hash_lock_*.lua`, which the spin lock shares), the lean mutex its own
//! (`lua/lock/mutex_*.lua`).

use ferrisson_core::__engine::{
    HASH_LOCK_ACQUIRE, HASH_LOCK_RELEASE, LOCK_PRELUDE, MARKS_PRELUDE, Script, TOKEN_PRELUDE,
};

/// Take a non-reentrant lock, refusing re-entry (`lua/lock/non_reentrant_acquire.lua`).
pub(crate) static NON_REENTRANT_ACQUIRE: Script = Script::with_two_preludes(
    "lock/non_reentrant_acquire",
    &LOCK_PRELUDE,
    &MARKS_PRELUDE,
    include_str!("../lua/non_reentrant_acquire.lua"),
);

/// Take a lean mutex (`lua/lock/mutex_acquire.lua`).
pub(crate) static MUTEX_ACQUIRE: Script = Script::with_two_preludes(
    "lock/mutex_acquire",
    &TOKEN_PRELUDE,
    &MARKS_PRELUDE,
    include_str!("../lua/mutex_acquire.lua"),
);

/// Release a lean mutex if the owner's token holds it (`lua/lock/mutex_release.lua`).
pub(crate) static MUTEX_RELEASE: Script = Script::new(
    "lock/mutex_release",
    include_str!("../lua/mutex_release.lua"),
);

/// Hand a lean mutex to a waiter of the same client (`lua/lock/mutex_hand_off.lua`).
pub(crate) static MUTEX_HAND_OFF: Script = Script::with_prelude(
    "lock/mutex_hand_off",
    &TOKEN_PRELUDE,
    include_str!("../lua/mutex_hand_off.lua"),
);

/// The watchdog's renewal of lean mutexes (`lua/lock/mutex_renew.lua`).
pub(crate) static MUTEX_RENEW: Script =
    Script::new("lock/mutex_renew", include_str!("../lua/mutex_renew.lua"));

/// Release a lean mutex whoever holds it (`lua/lock/mutex_force_release.lua`).
pub(crate) static MUTEX_FORCE_RELEASE: Script = Script::new(
    "lock/mutex_force_release",
    include_str!("../lua/mutex_force_release.lua"),
);

#[doc(hidden)]
/// Every script this crate runs, for tests and tools that load or check them (besides
/// `ferrisson_core`'s `core/renew_hash` and `core/force_release_hash`).
pub fn scripts() -> [&'static Script; 9] {
    [
        &NON_REENTRANT_ACQUIRE,
        &crate::inspect::MUTEX_INSPECT,
        &HASH_LOCK_ACQUIRE,
        &HASH_LOCK_RELEASE,
        &MUTEX_ACQUIRE,
        &MUTEX_RELEASE,
        &MUTEX_HAND_OFF,
        &MUTEX_RENEW,
        &MUTEX_FORCE_RELEASE,
    ]
}
