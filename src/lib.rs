//! # ferrisson
//!
//! Redisson's distributed synchronizers, done right in Rust: locks that never fail silently,
//! on the same Redis data layout as Redisson so that Java and Rust services share them by name.
//!
//! This crate is the facade: one dependency with a feature per synchronizer (`lock`, …, and
//! `full`). Each synchronizer is also its own crate (`ferrisson-lock`, …) depending only on
//! `ferrisson-core`, for users who want just one.
//!
//! | feature | type | Redisson |
//! |---|---|---|
//! | `lock` | [`ReentrantLock`] and [`FencedLock`], [`NonReentrantLock`], [`Mutex`] and [`FencedMutex`] (**\[ext\]**: the standard Redlock layout) | `RLock`, `RFencedLock`, `RNonReentrantLock` |
//! | `fair-lock` | [`FairLock`], [`NonReentrantFairLock`] | `RFairLock`, `RNonReentrantFairLock` |
//! | `rwlock` | [`ReadWriteLock`] | `RReadWriteLock` |
//! | `semaphore` | [`Semaphore`] | `RSemaphore` |
//! | `expirable-semaphore` | [`ExpirableSemaphore`] | `RPermitExpirableSemaphore` |
//! | `latch` | [`CountDownLatch`] | `RCountDownLatch` |
//! | `spin-lock` | [`SpinLock`] | `RSpinLock` |
//! | `multilock` | [`MultiLock`], [`RedLock`] | `RedissonMultiLock`, `RedissonRedLock` |
//! | `faster-multilock` | [`FasterMultiLock`] | `RedissonFasterMultiLock` |
//! | `rate-limiter` | [`RateLimiter`] | `RRateLimiter` |
//! | `tower` | [`tower`] layers: a concurrency limit on either semaphore, a rate limit (with `semaphore`, `expirable-semaphore` and `rate-limiter`) | |
//! | `full` | every feature above | |
//!
//! And, for any of them:
//!
//! | feature | what it adds |
//! |---|---|
//! | `blocking` | [`blocking`]: the same synchronizers for code without an async runtime |
//! | `metrics` | counters and histograms through the `metrics` facade ([`core::metrics`]) |
//! | `tls-rustls`, `tls-native-tls` | `rediss://` URLs, with either TLS stack |
//! | `dev` | [`dev`]: what the examples use besides the library (a throwaway `redis-server`, a stand-in API), for trying ferrisson out; not for production code |
//!
//! `lock` is the default. Every trait and type a program calls comes with one import,
//! `use ferrisson::prelude::*;` ([`prelude`]).
//!
//! ```no_run
//! # async fn demo() -> ferrisson::Result<()> {
//! use ferrisson::prelude::*;
//!
//! let client = Client::connect("redis://127.0.0.1:6379").await?;
//! let lock = FencedLock::new(&client, "ledger")?;
//! let guard = lock.lock().await?;
//! let token: u64 = guard.token(); // strictly greater than every earlier holder's
//! // The work runs only while the lock is held: a loss cuts it off with Error::LeaseLost.
//! guard
//!     .while_held(async { /* write to the ledger with `token`, so it rejects stale holders */ })
//!     .await?;
//! # let _ = token;
//! guard.unlock().await?;
//! # Ok(()) }
//! ```
//!
//! Scoped, the work gets the [`Hold`]: the token to stamp its writes with (a [`FencedHold`]'s is
//! a plain `u64`), a check before each step, and the loss signal. A loss cuts the work off with
//! [`Error::LeaseLost`] before the lease can have run out on the server; the signal is
//! `'static`, so a clean-up of the work's own can wait for it in a task:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let server = ferrisson_testkit::RedisServer::spawn();
//! # let url = server.url();
//! use std::time::Duration;
//! use ferrisson::prelude::*;
//!
//! // A 900 ms lease: the watchdog renews every 300 ms, and so sees a loss within that.
//! let config = ClientConfig::new(&url).with_lease(Duration::from_millis(900));
//! let client = Client::with_config(config).await?;
//! let lock = FencedLock::new(&client, "ledger")?;
//!
//! // A fenced write: the resource keeps the largest token it accepted and refuses older ones.
//! let accepted = &std::sync::Mutex::new(0u64);
//! let token = lock
//!     .with(|hold| async move {
//!         hold.ensure_held()?; // before the write
//!         let mut last = accepted.lock().map_err(|_| Error::Protocol("poisoned".into()))?;
//!         assert!(hold.token() > *last, "a newer holder's write goes in");
//!         *last = hold.token();
//!         Ok::<u64, Error>(hold.token())
//!     })
//!     .await??;
//!
//! // Work whose lock goes while it runs (an operator force-unlocks it; a failover would do
//! // the same): it is cut off, and its clean-up runs.
//! let (undo, undone) = tokio::sync::oneshot::channel();
//! let admin = &lock;
//! let outcome = lock
//!     .with(|hold| async move {
//!         let lost = hold.lost();
//!         tokio::spawn(async move {
//!             let reason = lost.await;
//!             let _ = undo.send(format!("rolled back: {reason}"));
//!         });
//!         admin.force_unlock().await?;
//!         for _step in 0..1_000 {
//!             hold.ensure_held()?; // never passes once the loss is known
//!             tokio::time::sleep(Duration::from_millis(20)).await;
//!         }
//!         Ok::<(), Error>(())
//!     })
//!     .await
//!     .and_then(|work| work);
//! assert!(matches!(outcome, Err(Error::LeaseLost(_))), "{outcome:?}");
//! println!("{}", undone.await?);
//! # let _ = token;
//! # Ok(()) }
//! ```
//!
//! Read [`docs/guarantees.md`](https://github.com/ferrisson/ferrisson/blob/main/docs/guarantees.md) for what Redis cannot promise (failover, pauses) and what the
//! library and you do about it.

#![cfg_attr(docsrs, feature(doc_cfg))]

#[doc(inline)]
pub use ferrisson_core::{
    AcquireOptions, Backoff, Client, ClientConfig, Error, Hold, HoldGuard, Lock, LossReason, Owner,
    PublishCommand, ReplicaSync, Replicas, Result, RetryPolicy, ShardedSubscription,
    ShutdownReport, SyncMode, SyncObject,
};

/// Who holds what ([`Client::inspect`], [`Client::list_objects`]): what the Redis layout says
/// of an object, for operators and the `ferrisson` command-line tool.
#[doc(inline)]
pub use ferrisson_core::{
    ChangeWatch, ClientRecord, HoldMode, Holder, INSPECT_LIMIT, KindFacts, KindInspection,
    LatchState, ObjectCall, ObjectInfo, ObjectKind, Party, PermitState, RateState, TakenPermit,
    Waiter,
};

/// Who waits for what across processes, and the deadlocks among them ([`Client::wait_graph`],
/// `ferrisson waits`, [`ClientConfig::with_deadlock_detection`]).
#[doc(inline)]
pub use ferrisson_core::{
    TaskHold, TaskWait, WAIT_RECORD_AFTER, WaitCycle, WaitGraph, WaitingTask,
};

pub use ferrisson_core::DeploymentReport;
/// Whether a deployment keeps ferrisson's guarantees ([`Client::check_deployment`], `ferrisson
/// doctor`).
pub use ferrisson_core::doctor;

pub mod prelude {
    //! Everything a program calls ferrisson through, in one import:
    //!
    //! ```
    //! use ferrisson::prelude::*;
    //! ```
    //!
    //! The traits whose methods every synchronizer has ([`Lock`]: `lock`, `with`, `is_locked`,
    //! …; [`SyncObject`]: `exists`, `expire`, `delete`, …; with `blocking`, its
    //! `blocking::BlockingObject`), the client and its options, and
    //! each synchronizer type of the features that are on. Not `Result`, which would shadow
    //! the standard one: name it `ferrisson::Result`.
    pub use ferrisson_core::{
        AcquireOptions, Client, ClientConfig, Error, Hold, HoldGuard, Lock, LossReason, Owner,
        SyncObject,
    };

    #[cfg(feature = "faster-multilock")]
    pub use crate::FasterMultiLock;
    #[cfg(feature = "rwlock")]
    pub use crate::ReadWriteLock;
    #[cfg(feature = "spin-lock")]
    pub use crate::SpinLock;
    #[cfg(feature = "blocking")]
    pub use crate::blocking::BlockingObject;
    #[cfg(feature = "latch")]
    pub use crate::{CountDown, CountDownLatch};
    #[cfg(feature = "expirable-semaphore")]
    pub use crate::{ExpirableSemaphore, Permit};
    #[cfg(feature = "fair-lock")]
    pub use crate::{FairLock, NonReentrantFairLock};
    #[cfg(feature = "lock")]
    pub use crate::{
        FencedGuard, FencedHold, FencedLock, FencedMutex, Mutex, NonReentrantLock, ReentrantLock,
    };
    #[cfg(feature = "multilock")]
    pub use crate::{MultiGuard, MultiLock, RedLock};
    #[cfg(feature = "semaphore")]
    pub use crate::{Permits, Semaphore};
    #[cfg(feature = "rate-limiter")]
    pub use crate::{RateArgs, RateLimiter, RateType};
}

pub mod core {
    //! What every synchronizer shares (crate `ferrisson-core`): the client and its settings,
    //! errors, the guard of a hold, owners, [`duration`] bounds and [`metrics`] names. The
    //! engine the synchronizer crates build on is not part of it.
    #[doc(inline)]
    pub use ferrisson_core::{
        AcquireOptions, Backoff, Client, ClientConfig, Error, Hold, HoldGuard, Lock, LossReason,
        Owner, PublishCommand, ReplicaSync, Replicas, Result, RetryPolicy, ShardedSubscription,
        SyncMode, SyncObject, duration, metrics,
    };
}

#[cfg(feature = "blocking")]
#[cfg_attr(docsrs, doc(cfg(feature = "blocking")))]
pub mod blocking;

#[cfg(feature = "lock")]
#[cfg_attr(docsrs, doc(cfg(feature = "lock")))]
#[doc(inline)]
pub use ferrisson_lock::{
    Fenced, FencedGuard, FencedHold, FencedLock, FencedMutex, Mutex, NonReentrantLock,
    ReentrantLock,
};

#[cfg(feature = "fair-lock")]
#[cfg_attr(docsrs, doc(cfg(feature = "fair-lock")))]
#[doc(inline)]
pub use ferrisson_fair_lock::{FairLock, NonReentrantFairLock};

#[cfg(feature = "rwlock")]
#[cfg_attr(docsrs, doc(cfg(feature = "rwlock")))]
#[doc(inline)]
pub use ferrisson_rwlock::{Mode, ReadLock, ReadWriteLock, SideLock, WriteLock};

#[cfg(feature = "semaphore")]
#[cfg_attr(docsrs, doc(cfg(feature = "semaphore")))]
#[doc(inline)]
pub use ferrisson_semaphore::{Permits, Semaphore};

#[cfg(feature = "expirable-semaphore")]
#[cfg_attr(docsrs, doc(cfg(feature = "expirable-semaphore")))]
#[doc(inline)]
pub use ferrisson_expirable_semaphore::{ExpirableSemaphore, Permit};

#[cfg(feature = "latch")]
#[cfg_attr(docsrs, doc(cfg(feature = "latch")))]
#[doc(inline)]
pub use ferrisson_latch::{CountDown, CountDownLatch, LatchStatus};

#[cfg(feature = "spin-lock")]
#[cfg_attr(docsrs, doc(cfg(feature = "spin-lock")))]
#[doc(inline)]
pub use ferrisson_spin_lock::SpinLock;

#[cfg(feature = "multilock")]
#[cfg_attr(docsrs, doc(cfg(feature = "multilock")))]
#[doc(inline)]
pub use ferrisson_multilock::{AnyLock, LockGroup, MultiGuard, MultiLock, RedLock};

#[cfg(feature = "faster-multilock")]
#[cfg_attr(docsrs, doc(cfg(feature = "faster-multilock")))]
#[doc(inline)]
pub use ferrisson_faster_multilock::{FasterMultiLock, MAX_VALUES, Part, redisson_field};

#[cfg(feature = "rate-limiter")]
#[cfg_attr(docsrs, doc(cfg(feature = "rate-limiter")))]
#[doc(inline)]
pub use ferrisson_rate_limiter::{RateArgs, RateLimiter, RateType};

/// Tools for trying ferrisson out (crate `ferrisson-dev`): a throwaway `redis-server`
/// ([`RedisServer`](dev::RedisServer)), a stand-in for a third-party API that keeps its record in
/// Redis ([`StandInApi`](dev::StandInApi)), worker processes and a plain HTTP GET. The examples
/// use them, so that each compiles pasted into an app with the features it names; they are not
/// for production code.
#[cfg(feature = "dev")]
#[cfg_attr(docsrs, doc(cfg(feature = "dev")))]
pub mod dev {
    #[doc(inline)]
    pub use ferrisson_dev::*;
}

/// tower layers whose limits hold across every instance of a service (crate
/// `ferrisson-tower`): [`DistributedConcurrencyLimitLayer`](tower::DistributedConcurrencyLimitLayer)
/// and [`DistributedRateLimitLayer`](tower::DistributedRateLimitLayer).
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub mod tower {
    #[doc(inline)]
    pub use ferrisson_tower::*;
}
