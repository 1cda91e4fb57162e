//! The Lua scripts of the semaphore (`lua/semaphore/`).

use ferrisson_core::__engine::{RECORD_PRELUDE, Script};

pub(crate) static ACQUIRE: Script = Script::with_prelude(
    "semaphore/acquire",
    &RECORD_PRELUDE,
    include_str!("../lua/acquire.lua"),
);
pub(crate) static RELEASE: Script = Script::with_prelude(
    "semaphore/release",
    &RECORD_PRELUDE,
    include_str!("../lua/release.lua"),
);
pub(crate) static UNDO_ACQUIRE: Script = Script::with_prelude(
    "semaphore/undo_acquire",
    &RECORD_PRELUDE,
    include_str!("../lua/undo_acquire.lua"),
);
pub(crate) static DRAIN: Script = Script::new("semaphore/drain", include_str!("../lua/drain.lua"));

#[doc(hidden)]
/// Every script this crate runs, for tests and tools that load or check them (it also runs
/// `ferrisson_core`'s `core/permits_update` and `core/permits_leave`).
pub fn scripts() -> [&'static Script; 4] {
    [&ACQUIRE, &RELEASE, &UNDO_ACQUIRE, &DRAIN]
}
