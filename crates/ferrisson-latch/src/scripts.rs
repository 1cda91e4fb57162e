//! The Lua scripts of the countdown latch (`lua/latch/`).

use ferrisson_core::engine::Script;

pub(crate) static TRY_SET: Script =
    Script::new("latch/try_set", include_str!("../lua/try_set.lua"));
pub(crate) static COUNT_DOWN: Script =
    Script::new("latch/count_down", include_str!("../lua/count_down.lua"));
pub(crate) static STATE: Script = Script::new("latch/state", include_str!("../lua/state.lua"));
pub(crate) static DELETE: Script = Script::new("latch/delete", include_str!("../lua/delete.lua"));

/// Every script this crate runs, for tests and tools that load or check them.
pub fn scripts() -> [&'static Script; 4] {
    [&TRY_SET, &COUNT_DOWN, &STATE, &DELETE]
}
