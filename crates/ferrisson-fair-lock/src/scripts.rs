//! The Lua scripts of the fair lock (`lua/fair_lock/`).

use ferrisson_core::__engine::{LOCK_PRELUDE, Script};

pub(crate) static ACQUIRE: Script = Script::with_prelude(
    "fair_lock/acquire",
    &LOCK_PRELUDE,
    include_str!("../lua/acquire.lua"),
);
pub(crate) static RELEASE: Script = Script::with_prelude(
    "fair_lock/release",
    &LOCK_PRELUDE,
    include_str!("../lua/release.lua"),
);
pub(crate) static LEAVE: Script = Script::with_prelude(
    "fair_lock/leave",
    &LOCK_PRELUDE,
    include_str!("../lua/leave.lua"),
);
pub(crate) static FORCE_RELEASE: Script = Script::with_prelude(
    "fair_lock/force_release",
    &LOCK_PRELUDE,
    include_str!("../lua/force_release.lua"),
);

/// Every script this crate runs, for tests and tools that load or check them (the watchdog
/// renews its holds with `ferrisson_core`'s `core/renew_hash`).
pub fn scripts() -> [&'static Script; 4] {
    [&ACQUIRE, &RELEASE, &LEAVE, &FORCE_RELEASE]
}
