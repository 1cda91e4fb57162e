//! The hub's model checks (`cargo test -p ferrisson-core --lib model_check`): the hub's source
//! ([`pubsub`](crate::pubsub)) built a second time, on shuttle's locks, atomics and threads, so
//! that shuttle explores the interleavings of the threads that use them (its `model` module).
//! A module of the test build rather than a build of its own: every test run checks the model,
//! with no other flags and nothing else built twice.

/// shuttle's locks, atomics and threads, in place of std's.
mod hub_sync {
    pub(crate) use shuttle::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
    pub(crate) use shuttle::sync::{Mutex, MutexGuard};
    pub(crate) use shuttle::thread;
}

/// The checks this build of the hub's source runs: the model checks.
macro_rules! hub_checks {
    () => {
        mod model;
    };
}

/// This build uses only what the model checks reach. Loading the hub's files a second time is
/// the point (`clippy::duplicate_mod`).
#[allow(dead_code, unused_imports, clippy::duplicate_mod)]
#[path = "pubsub/mod.rs"]
mod pubsub;
