//! The permit kinds: both semaphores, the countdown latch and the rate limiter, with Redisson
//! interop and the permit conformance suite.
//!
//! One test binary of a few (`tests/<area>/main.rs`), each file a module: the graph links once
//! per area, not once per file. Every test talks to a real `redis-server`.

#[path = "../common/mod.rs"]
mod common;

mod expirable_semaphore;
mod latch;
mod permit_conformance;
mod rate_limiter;
mod rate_limiter_redisson;
mod semaphore;
mod semaphore_after_loss;
