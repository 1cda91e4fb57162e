//! A countdown latch on Redis with Redisson's `RCountDownLatch` semantics and data layout: a
//! barrier across processes. A coordinator sets the count, workers on other machines count
//! down when their part is done, and everyone waiting is released together.
//!
//! ```no_run
//! # async fn demo() -> ferrisson_latch::Result<()> {
//! use std::time::Duration;
//! use ferrisson_latch::Client;
//! use ferrisson_latch::CountDownLatch;
//!
//! let client = Client::connect("redis://127.0.0.1:6379").await?;
//! let barrier = CountDownLatch::new(&client, "nightly-import:2026-11-30")?;
//! barrier.try_set_count(8).await?; // the coordinator
//! // ... each of 8 workers, once done (a retried worker counts once):
//! if !barrier.count_down_once("worker-3").await?.counted() {
//!     // not armed (the coordinator has not set it yet), or counted before: see CountDown
//! }
//! // ... the coordinator:
//! if barrier.wait_for(Duration::from_secs(600)).await? {
//!     // every part is done
//! }
//! # Ok(()) }
//! ```

mod inspect;
mod latch;
mod scripts;

pub use ferrisson_core::SyncObject;
// What a user of this crate alone needs, without a dependency on `ferrisson-core`.
pub use ferrisson_core::{Client, ClientConfig, Error, LossReason, Owner, Result};
pub use latch::{CountDown, CountDownLatch, DEFAULT_COMPLETION_MEMORY, LatchStatus};
pub use scripts::scripts;
