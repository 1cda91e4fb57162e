//! The Lua scripts of the fair lock (`lua/fair_lock/`).

use ferrisson_core::__engine::{LOCK_PRELUDE, RELEASE_PRELUDE, Script};

/// The fair lock's shared functions (`lua/fair_lock/prelude.lua`: `fair_purge`, which drops the
/// dead waiters at the head of the queue), after the release functions of the locks kept in a
/// hash (and the lock scripts' prelude before them).
pub(crate) static PRELUDE: Script = Script::with_prelude(
    "fair_lock/prelude",
    &RELEASE_PRELUDE,
    include_str!("../lua/prelude.lua"),
);

pub(crate) static ACQUIRE: Script = Script::with_prelude(
    "fair_lock/acquire",
    &PRELUDE,
    include_str!("../lua/acquire.lua"),
);
pub(crate) static RELEASE: Script = Script::with_prelude(
    "fair_lock/release",
    &PRELUDE,
    include_str!("../lua/release.lua"),
);
pub(crate) static LEAVE: Script = Script::with_prelude(
    "fair_lock/leave",
    &PRELUDE,
    include_str!("../lua/leave.lua"),
);
pub(crate) static FORCE_RELEASE: Script = Script::with_prelude(
    "fair_lock/force_release",
    &LOCK_PRELUDE,
    include_str!("../lua/force_release.lua"),
);

#[doc(hidden)]
/// Every script this crate runs, for tests and tools that load or check them (the watchdog
/// renews its holds with `ferrisson_core`'s `core/renew_hash`).
pub fn scripts() -> [&'static Script; 6] {
    [
        &PRELUDE,
        &ACQUIRE,
        &RELEASE,
        &LEAVE,
        &FORCE_RELEASE,
        &crate::inspect::INSPECT,
    ]
}
