//! The shared core of [ferrisson](https://docs.rs/ferrisson): Redisson's distributed
//! synchronizers for Rust.
//!
//! This crate holds what every synchronizer needs and nothing specific to any of them:
//!
//! - [`Client`]: the command connection (reconnecting by itself), the client id and settings;
//! - [`Script`]: the Lua script registry, run by `EVALSHA` with a `NOSCRIPT` fallback;
//! - [`keys`]: key and channel naming of the Redis state protocol;
//! - [`Owner`]: who holds what (a fresh owner per acquisition unless a handle is bound to one);
//! - the watchdog ([`LeaseSpec`], [`LeaseHandle`]): lease renewal by batches and the loss
//!   signal;
//! - pub/sub waiters ([`Subscription`]): one subscriber connection per client;
//! - what every lock kind shares ([`HoldGuard`], [`LockOptions`], [`Release`]);
//! - [`Error`], the one error type.
//!
//! Users normally depend on the `ferrisson` facade or on one synchronizer crate
//! (`ferrisson-lock`, …), which re-export what they need from here.

mod client;
mod config;
pub mod duration;
mod error;
mod hold;
pub mod keys;
mod lock;
mod owner;
pub mod permits;
mod pubsub;
mod script;
mod watchdog;

pub use client::Client;
pub use config::{ClientConfig, PublishCommand, RetryPolicy};
pub use error::{Error, LossReason, Result, map_redis_error};
pub use hold::{
    Attempt, CleanupGuard, FORCE_RELEASE_HASH, FirstRound, HoldGuard, LockOptions, RENEW_HASH,
    Release, Released, Start, WaitPacer, WaitSpec, begin_wait, register_early, scripts,
    spawn_cleanup, ttl_bound, wait_for_turn, wait_on, wait_registered,
};
pub use lock::{Lock, hash_hold_count};
pub use owner::Owner;
pub use pubsub::{
    Claim, Handoff, MAX_HANDOFF_STREAK, Subscription, Tag, Trying, Wake, WakePolicy, Woken,
    lock_message_policy, permits_message_policy,
};
pub use script::{PROTOCOL_VERSION, Script, ScriptCall, ScriptHeader};
pub use watchdog::{BATCH, LeaseEnd, LeaseHandle, LeaseSpec, LeaseState};

/// Re-exported for synchronizer crates, whose plain commands go through [`Client::query`].
pub use redis;

/// Re-exported for synchronizer crates: `tokio::time::Instant`, the clock of [`LeaseSpec`].
pub use tokio::time::Instant;
