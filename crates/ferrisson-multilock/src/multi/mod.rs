//! MultiLock and RedLock: one acquisition over several locks.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use tokio::time::Instant;

use ferrisson_core::__engine::{Between, ClientEngine, Pace, Rounds, WaitPacer, drive, no_reply};
use ferrisson_core::{AcquireOptions, Client, Error, HoldGuard, Lock, LossReason, Result};

mod any_lock;
mod gate;
mod group;
mod guard;
/// The locks and atomics the gate's queue ([`queue`]) is built on: std's. Its model checks
/// build the same source a second time on shuttle's ([`model_check`], in test builds).
mod queue_sync {
    pub(crate) use std::sync::atomic::{AtomicU32, AtomicU64};
    pub(crate) use std::sync::{Mutex, MutexGuard};
}
#[cfg(test)]
mod model_check;
mod queue;
mod rounds;

pub use any_lock::AnyLock;
use gate::*;
pub use group::{LockGroup, MultiLock, RedLock};
pub use guard::MultiGuard;
use guard::*;
use rounds::*;
