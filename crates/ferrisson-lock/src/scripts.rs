//! The Lua scripts of the reentrant lock (`lua/lock/`).

use ferrisson_core::Script;

pub(crate) static ACQUIRE: Script = Script::new("lock/acquire", include_str!("../lua/acquire.lua"));
pub(crate) static RELEASE: Script = Script::new("lock/release", include_str!("../lua/release.lua"));
pub(crate) static FORCE_RELEASE: Script = Script::new(
    "lock/force_release",
    include_str!("../lua/force_release.lua"),
);

/// Every script this crate runs, for tests and tools that load or check them (the watchdog
/// renews its holds with `ferrisson_core`'s `core/renew_hash`).
pub fn scripts() -> [&'static Script; 3] {
    [&ACQUIRE, &RELEASE, &FORCE_RELEASE]
}
