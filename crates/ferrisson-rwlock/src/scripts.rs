//! The Lua scripts of the read-write lock (`lua/rwlock/`).

use ferrisson_core::__engine::{LOCK_PRELUDE, MARKS_PRELUDE, RELEASE_PRELUDE, Script};

pub(crate) static READ_ACQUIRE: Script = Script::with_two_preludes(
    "rwlock/read_acquire",
    &LOCK_PRELUDE,
    &MARKS_PRELUDE,
    include_str!("../lua/read_acquire.lua"),
);
pub(crate) static WRITE_ACQUIRE: Script = Script::with_two_preludes(
    "rwlock/write_acquire",
    &LOCK_PRELUDE,
    &MARKS_PRELUDE,
    include_str!("../lua/write_acquire.lua"),
);
pub(crate) static READ_RELEASE: Script = Script::with_prelude(
    "rwlock/read_release",
    &RELEASE_PRELUDE,
    include_str!("../lua/read_release.lua"),
);
pub(crate) static WRITE_RELEASE: Script = Script::with_prelude(
    "rwlock/write_release",
    &RELEASE_PRELUDE,
    include_str!("../lua/write_release.lua"),
);
pub(crate) static WRITE_LEAVE: Script =
    Script::new("rwlock/write_leave", include_str!("../lua/write_leave.lua"));
pub(crate) static RENEW: Script = Script::new("rwlock/renew", include_str!("../lua/renew.lua"));

#[doc(hidden)]
/// Every script this crate runs, for tests and tools that load or check them (it also runs
/// `ferrisson_core`'s `core/force_release_hash`).
pub fn scripts() -> [&'static Script; 7] {
    [
        &crate::inspect::INSPECT,
        &READ_ACQUIRE,
        &WRITE_ACQUIRE,
        &READ_RELEASE,
        &WRITE_RELEASE,
        &WRITE_LEAVE,
        &RENEW,
    ]
}
