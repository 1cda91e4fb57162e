//! The client and its deployments: connections, ACLs, TLS, clusters and sentinels, scripts,
//! inspection, metrics, the blocking API, and the Redisson object calls every kind shares.
//!
//! One test binary of a few (`tests/<area>/main.rs`), each file a module: the graph links once
//! per area, not once per file. Every test talks to a real `redis-server`.

#[path = "../common/mod.rs"]
mod common;

mod acl;
mod blocking;
mod client;
mod cluster;
mod doctor;
mod inspect;
mod inspect_registered;
mod layout;
mod readme;
mod redisson_parity;
mod scripts;
mod sentinel;
mod waits;
