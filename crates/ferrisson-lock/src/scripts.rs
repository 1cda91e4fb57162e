//! The Lua scripts of the reentrant lock (`lua/lock/`).

use ferrisson_core::engine::{LOCK_PRELUDE, Script};

pub(crate) static ACQUIRE: Script = Script::with_prelude(
    "lock/acquire",
    &LOCK_PRELUDE,
    include_str!("../lua/acquire.lua"),
);
pub(crate) static RELEASE: Script = Script::with_prelude(
    "lock/release",
    &LOCK_PRELUDE,
    include_str!("../lua/release.lua"),
);

/// Every script this crate runs, for tests and tools that load or check them (it also runs
/// `ferrisson_core`'s `core/renew_hash` and `core/force_release_hash`).
pub fn scripts() -> [&'static Script; 2] {
    [&ACQUIRE, &RELEASE]
}
