//! The Lua scripts of the semaphore (`lua/semaphore/`).

use ferrisson_core::__engine::Script;

pub(crate) static ACQUIRE: Script =
    Script::new("semaphore/acquire", include_str!("../lua/acquire.lua"));
pub(crate) static RELEASE: Script =
    Script::new("semaphore/release", include_str!("../lua/release.lua"));
pub(crate) static UNDO_ACQUIRE: Script = Script::new(
    "semaphore/undo_acquire",
    include_str!("../lua/undo_acquire.lua"),
);
pub(crate) static DRAIN: Script = Script::new("semaphore/drain", include_str!("../lua/drain.lua"));

#[doc(hidden)]
/// Every script this crate runs, for tests and tools that load or check them (it also runs
/// `ferrisson_core`'s `core/permits_update` and `core/permits_leave`).
pub fn scripts() -> [&'static Script; 4] {
    [&ACQUIRE, &RELEASE, &UNDO_ACQUIRE, &DRAIN]
}
