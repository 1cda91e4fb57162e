//! The reentrant lock's scripts: the hash-lock scripts of `ferrisson_core`
//! (`lua/core/hash_lock_*.lua`), which the spin lock shares.

use ferrisson_core::__engine::{HASH_LOCK_ACQUIRE, HASH_LOCK_RELEASE, Script};

#[doc(hidden)]
/// Every script this crate runs, for tests and tools that load or check them (all of them
/// `ferrisson_core`'s: these two, `core/renew_hash` and `core/force_release_hash`).
pub fn scripts() -> [&'static Script; 2] {
    [&HASH_LOCK_ACQUIRE, &HASH_LOCK_RELEASE]
}
