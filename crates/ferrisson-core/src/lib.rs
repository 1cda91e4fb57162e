//! The shared core of [ferrisson](https://docs.rs/ferrisson): Redisson's distributed
//! synchronizers for Rust.
//!
//! This crate holds what every synchronizer needs and nothing specific to any one of them (two
//! Redis layouts that several kinds share, Redisson's lock hash and a count of permits, are
//! kept here as layouts), for two audiences:
//!
//! - **Users**, at the crate root: [`Client`] (connections, settings), [`ClientConfig`],
//!   [`Error`] and [`LossReason`], the guard of a hold ([`HoldGuard`]) and the options of an
//!   acquire ([`AcquireOptions`]), the [`Lock`] trait every lock kind implements, [`Owner`]
//!   (who holds what: a fresh owner per acquisition unless a handle is bound to one), and
//!   [`duration`] (which durations are valid where).
//! - **Synchronizer crates**, in a hidden engine module that is not public API (the facade
//!   does not re-export it): the acquire/wait/release machinery, scripts, key naming, the
//!   watchdog's lease table and pub/sub waiters.
//!
//! Users normally depend on the `ferrisson` facade or on one synchronizer crate
//! (`ferrisson-lock`, …), which re-export what they need from here. A client is made once and
//! shared (it is cheap to clone) by every synchronizer of the process:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let server = ferrisson_testkit::RedisServer::spawn();
//! # let url = server.url();
//! use std::time::Duration;
//! use ferrisson_core::{Client, ClientConfig};
//!
//! let client = Client::with_config(
//!     ClientConfig::new(url)
//!         .with_namespace("billing:")
//!         .with_lease(Duration::from_secs(9)),
//! )
//! .await?;
//! // The watchdog renews every hold a third of the lease before it would run out.
//! assert_eq!(client.config().watchdog_period(), Duration::from_secs(3));
//! // Two acquisitions never share a hold unless they share an owner.
//! assert_ne!(client.new_owner(), client.new_owner());
//! # Ok(()) }
//! ```

mod batch;
mod client;
mod config;
mod connection;
pub mod doctor;
pub mod duration;
mod error;
mod grant;
mod guard;
mod handle;
mod hash_lock;
mod holds;
mod identity;
mod inspect;
mod keys;
mod kind;
#[cfg(test)]
mod layers;
mod local;
mod lock;
pub mod metrics;
mod object;
mod options;
mod owner;
mod pacer;
mod permits;
/// The locks, atomics and threads the hub ([`pubsub`]) is built on: std's. Its model checks
/// build the same source a second time on shuttle's ([`model_check`], in test builds).
mod hub_sync {
    pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
    pub(crate) use std::sync::{Mutex, MutexGuard};
    #[cfg(test)]
    pub(crate) use std::thread;
}
/// The checks this build of the hub's source runs: its unit tests, on real threads.
#[cfg(test)]
macro_rules! hub_checks {
    () => {
        mod tests;
    };
}
mod drive;
#[cfg(test)]
mod model_check;
mod pubsub;
mod record;
mod record_slots;
mod releasing;
mod replica_sync;
mod replication;
mod scoped;
mod script;
mod sentinel;
mod time;
mod tracking;
mod wait;
mod waits;
mod watchdog;

// What users touch.
pub use client::Client;
pub use client::ShutdownReport;
pub use config::{Backoff, ClientConfig, PublishCommand, RetryPolicy, ShardedSubscription};
pub use doctor::DeploymentReport;
pub use error::{Error, LossReason, Result};
pub use guard::HoldGuard;
pub use inspect::{
    ChangeWatch, ClientRecord, HoldMode, Holder, INSPECT_LIMIT, KindFacts, KindInspection,
    LatchState, ObjectCall, ObjectFuture, ObjectInfo, ObjectKind, Party, PermitState, RateState,
    TakenPermit, TaskHold, TaskWait, WaitCycle, WaitGraph, Waiter, WaitingTask,
};
pub use lock::Lock;
pub use object::SyncObject;
pub use options::AcquireOptions;
pub use owner::Owner;
pub use replica_sync::{ReplicaSync, Replicas, SyncMode};
pub use scoped::Hold;
pub use tracking::{TRACKED_RECHECK, TrackingStats};
pub use waits::WAIT_RECORD_AFTER;

#[doc(hidden)]
pub mod __engine {
    //! The engine: what the synchronizer crates build on. Not public API: hidden from the docs,
    //! not re-exported by the `ferrisson` facade, and free to change in any release (as serde's
    //! `__private`). One acquire, wait and release machinery for every kind (see
    //! [`docs/architecture.md`](https://github.com/ferrisson/ferrisson/blob/main/docs/architecture.md)):
    //!
    //! - [`ClientEngine`] (sealed: only [`Client`](crate::Client) implements it): script calls
    //!   that settle lost replies (`eval`, `settle`), plain commands, pub/sub waiters and
    //!   hand-off claims, leases with the watchdog, key naming;
    //! - the lock kinds' engine: [`HoldKind`] (a kind's scripts, waiting and give-up), driven by
    //!   [`acquire`] and [`release`];
    //! - the one acquisition entry ([`acquisition`]) and the one loop ([`drive`]), which runs
    //!   a kind's [`Rounds`]: on a channel ([`wait_for_turn`], [`WaitSpec`]), polled
    //!   ([`poll_wait`], [`Poll`]) or in rounds over several locks (MultiLock, RedLock), with
    //!   one outage rule ([`WaitPacer`]), and their tries ([`Attempt`]);
    //! - typed local hand-offs ([`Grant`], [`Taken`], [`Takes`]);
    //! - cleanups for cancelled and unknown calls ([`CleanupGuard`], [`spawn_cleanup`]);
    //! - the guard's seam ([`Release`], [`Released`], [`hold_guard`]) and the lease table ([`LeaseSpec`]);
    //! - pub/sub wake policies and local hand-offs ([`Need`], [`Claim`], [`Wake`]);
    //! - scripts ([`Script`], [`ScriptCall`]), [`keys`], the semaphores' [`permits`].

    pub use crate::client::ClientEngine;
    pub use crate::connection::refusal_ends_calls;
    pub use crate::grant::{Grant, Taken, Takes};
    pub use crate::guard::{
        CleanupGuard, HoldLock, Release, Released, hold_guard, spawn_cleanup, until_lost,
    };
    pub use crate::handle::{LockHandle, LockKind, LockType};
    pub use crate::holds::{GiveBack, Held, HoldTicket};
    pub use crate::local::{LocalPlace, LocalWaiters};
    pub use crate::lock::LockWatch;
    pub use crate::permits::hand_off_permits;
    /// The registry a kind crate teaches inspection its kind through
    /// ([`KindInspection`](crate::KindInspection)): `inventory::submit!`.
    pub use inventory;
    /// Key and channel naming, and request ids.
    pub mod keys {
        pub use crate::keys::*;
    }
    /// Client records and tags **\[ext\]**.
    pub mod identity {
        pub use crate::identity::{RECORD_PREFIX, client_tag, record_key};
    }
    pub use crate::hash_lock::{
        FORCE_RELEASE_HASH, HASH_LOCK_ACQUIRE, HASH_LOCK_RELEASE, HashLock, RENEW_HASH,
    };
    pub use crate::inspect::{
        INSPECT_PRELUDE, delete_through, force_unlock_through, lock_channel, note_wait,
    };
    pub use crate::kind::{
        HoldKind, LockNames, REENTRY_REFUSED, ReleaseArgs, ReleaseReply, TryArgs, TryReply,
        Waiting, acquire, read_script_try, release,
    };
    pub use crate::lock::WATCH_RECHECK;
    pub use crate::object::{KeyShape, ObjectKeys, ObjectLayout, object_state};
    pub use crate::options::wait_without_lease;
    pub use crate::scripts;
    pub use crate::waits::WaitFor;
    /// The semaphores' engine.
    pub mod permits {
        pub use crate::permits::*;
    }
    pub use crate::drive::{Acquisition, Between, Pace, Rounds, acquisition, drive};
    pub use crate::pubsub::{Claim, MAX_HANDOFF_STREAK, Need, Wake, lock_message_policy};
    pub use crate::record::{CallRecord, RecordedCall};
    pub use crate::script::{
        LOCK_PRELUDE, MARKS_PRELUDE, PROTOCOL_VERSION, RECORD_PRELUDE, RELEASE_PRELUDE, Script,
        ScriptCall, TOKEN_PRELUDE,
    };
    pub use crate::wait::{
        Attempt, Poll, WaitPacer, WaitSpec, first_try, no_reply, poll_wait, wait_for_turn,
    };
    /// Milliseconds for script arguments, deadlines that never overflow the clock.
    pub mod time {
        pub use crate::time::*;
    }
    pub use crate::scoped::HoldWatch;
    pub use crate::tracking::{Tracked, is_owner_token};
    pub use crate::watchdog::{LeaseEnd, LeaseHandle, LeaseSpec, LeaseWatch};

    /// `tokio::time::Instant`, the clock of [`LeaseSpec`].
    pub use tokio::time::Instant;
}

/// Every script this crate runs, for tests and tools that load or check them.
#[doc(hidden)]
pub fn scripts() -> [&'static script::Script; 18] {
    [
        &crate::script::TOKEN_PRELUDE,
        &crate::object::OBJECT_STATE,
        &crate::object::OBJECT_EXPIRE,
        &crate::object::OBJECT_DELETE,
        &crate::script::LOCK_PRELUDE,
        &crate::script::RELEASE_PRELUDE,
        &crate::script::MARKS_PRELUDE,
        &crate::script::RECORD_PRELUDE,
        &crate::hash_lock::HASH_LOCK_ACQUIRE,
        &crate::hash_lock::HASH_LOCK_RELEASE,
        &crate::hash_lock::RENEW_HASH,
        &crate::hash_lock::FORCE_RELEASE_HASH,
        &crate::permits::PERMITS_UPDATE,
        &crate::permits::PERMITS_LEAVE,
        &crate::identity::CLIENT_RECORD,
        &crate::inspect::CLIENT_WAITS,
        &crate::inspect::INSPECT_PRELUDE,
        &crate::inspect::INSPECT,
    ]
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_registered_script_keeps_what_it_calls() {
        for script in super::scripts() {
            let source = script.source();
            for (name, _) in crate::script::prelude_functions(source) {
                assert!(
                    source.matches(&format!("local function {name}(")).count() == 1,
                    "{}: {name} defined twice",
                    script.name()
                );
            }
        }
    }
}
