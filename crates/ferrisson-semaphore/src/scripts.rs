//! The Lua scripts of the semaphore (`lua/semaphore/`).

use ferrisson_core::Script;

pub(crate) static ACQUIRE: Script =
    Script::new("semaphore/acquire", include_str!("../lua/acquire.lua"));
pub(crate) static RELEASE: Script =
    Script::new("semaphore/release", include_str!("../lua/release.lua"));
pub(crate) static UNDO_ACQUIRE: Script = Script::new(
    "semaphore/undo_acquire",
    include_str!("../lua/undo_acquire.lua"),
);
pub(crate) static LEAVE: Script = Script::new("semaphore/leave", include_str!("../lua/leave.lua"));
pub(crate) static UPDATE: Script =
    Script::new("semaphore/update", include_str!("../lua/update.lua"));
pub(crate) static DRAIN: Script = Script::new("semaphore/drain", include_str!("../lua/drain.lua"));

/// Every script this crate runs, for tests and tools that load or check them.
pub fn scripts() -> [&'static Script; 6] {
    [&ACQUIRE, &RELEASE, &UNDO_ACQUIRE, &LEAVE, &UPDATE, &DRAIN]
}
