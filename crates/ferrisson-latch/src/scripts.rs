//! The Lua scripts of the countdown latch (`lua/latch/`).

use ferrisson_core::__engine::{LOCK_PRELUDE, RECORD_PRELUDE, Script};

pub(crate) static TRY_SET: Script = Script::with_prelude(
    "latch/try_set",
    &LOCK_PRELUDE,
    include_str!("../lua/try_set.lua"),
);
pub(crate) static COUNT_DOWN: Script = Script::with_prelude(
    "latch/count_down",
    &RECORD_PRELUDE,
    include_str!("../lua/count_down.lua"),
);
pub(crate) static STATE: Script = Script::new("latch/state", include_str!("../lua/state.lua"));
pub(crate) static DELETE: Script = Script::with_prelude(
    "latch/delete",
    &LOCK_PRELUDE,
    include_str!("../lua/delete.lua"),
);

#[doc(hidden)]
/// Every script this crate runs, for tests and tools that load or check them.
pub fn scripts() -> [&'static Script; 5] {
    [
        &TRY_SET,
        &COUNT_DOWN,
        &STATE,
        &DELETE,
        &crate::inspect::INSPECT,
    ]
}
