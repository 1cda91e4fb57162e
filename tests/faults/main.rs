//! Faults and their edges: the fault suite's worker processes, lost replies, outages,
//! failovers in a cluster, retry records, replica sync, deadlines, shutdown, durations and bad
//! input.
//!
//! One test binary of a few (`tests/<area>/main.rs`), each file a module: the graph links once
//! per area, not once per file. Every test talks to a real `redis-server`.

#[path = "../common/mod.rs"]
mod common;

mod abandoned_releases;
mod bad_input;
mod cluster_faults;
mod deadlines;
mod durations;
mod fault_suite;
mod late_copies;
mod lost_replies;
mod outages;
mod replica_sync;
mod retry_records;
mod shutdown;
