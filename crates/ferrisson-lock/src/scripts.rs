//! The Lua scripts of the reentrant lock (`lua/lock/`).

use ferrisson_core::Script;

pub(crate) static ACQUIRE: Script = Script::new("lock/acquire", include_str!("../lua/acquire.lua"));
pub(crate) static RELEASE: Script = Script::new("lock/release", include_str!("../lua/release.lua"));
pub(crate) static RENEW: Script = Script::new("lock/renew", include_str!("../lua/renew.lua"));
pub(crate) static FORCE_RELEASE: Script = Script::new(
    "lock/force_release",
    include_str!("../lua/force_release.lua"),
);

/// Every script this crate runs, for tests and tools that load or check them.
pub fn scripts() -> [&'static Script; 4] {
    [&ACQUIRE, &RELEASE, &RENEW, &FORCE_RELEASE]
}
