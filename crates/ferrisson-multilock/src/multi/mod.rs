//! MultiLock and RedLock: one acquisition over several locks.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use tokio::time::Instant;

use ferrisson_core::__engine::{
    Between, Claim, ClientEngine, Grant, HoldLock, HoldWatch, LocalPlace, Pace, Rounds, Taken,
    WaitPacer, drive, no_reply, refusal_ends_calls,
};
use ferrisson_core::{AcquireOptions, Client, Error, Hold, HoldGuard, Lock, LossReason, Result};

mod any_lock;
mod gate;
mod group;
mod guard;
mod rounds;

pub use any_lock::AnyLock;
use gate::*;
pub use group::{LockGroup, MultiLock, RedLock};
pub use guard::MultiGuard;
use guard::*;
use rounds::*;
