//! The lock kinds: the reentrant lock, the lean mutex, the fair, read-write and spin locks,
//! MultiLock and RedLock, scoped use, owners, fencing, and the conformance suite every lock kind
//! runs.
//!
//! One test binary of a few (`tests/<area>/main.rs`), each file a module: the graph links once
//! per area, not once per file. Every test talks to a real `redis-server`.

#[path = "../common/mod.rs"]
mod common;

mod conformance;
mod deadlocks;
mod fair_lock;
mod fair_lock_redisson;
mod faster_multilock;
mod faster_multilock_redisson;
mod fencing_after_loss;
mod lock;
mod multilock;
mod mutex;
mod non_reentrant;
mod owners;
mod rwlock;
mod scoped;
mod spin_lock;
mod tracked_waits;
mod turns;
