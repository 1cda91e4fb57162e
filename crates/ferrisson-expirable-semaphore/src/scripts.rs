//! The Lua scripts of the permit-expirable semaphore (`lua/expirable_semaphore/`).

use ferrisson_core::__engine::{RECORD_PRELUDE, Script};

pub(crate) static ACQUIRE: Script = Script::with_prelude(
    "expirable_semaphore/acquire",
    &RECORD_PRELUDE,
    include_str!("../lua/acquire.lua"),
);
pub(crate) static RELEASE: Script = Script::with_prelude(
    "expirable_semaphore/release",
    &RECORD_PRELUDE,
    include_str!("../lua/release.lua"),
);
pub(crate) static RENEW: Script = Script::new(
    "expirable_semaphore/renew",
    include_str!("../lua/renew.lua"),
);
pub(crate) static UNDO_ACQUIRE: Script = Script::with_prelude(
    "expirable_semaphore/undo_acquire",
    &RECORD_PRELUDE,
    include_str!("../lua/undo_acquire.lua"),
);
pub(crate) static HAND_OFF: Script = Script::new(
    "expirable_semaphore/hand_off",
    include_str!("../lua/hand_off.lua"),
);
pub(crate) static STATE: Script = Script::new(
    "expirable_semaphore/state",
    include_str!("../lua/state.lua"),
);

#[doc(hidden)]
/// Every script this crate runs, for tests and tools that load or check them (it also runs
/// `ferrisson_core`'s `core/permits_update` and `core/permits_leave`).
pub fn scripts() -> [&'static Script; 7] {
    [
        &crate::inspect::INSPECT,
        &ACQUIRE,
        &RELEASE,
        &RENEW,
        &UNDO_ACQUIRE,
        &HAND_OFF,
        &STATE,
    ]
}
