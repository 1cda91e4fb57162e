//! Interop tests of the lean `Mutex` with the Redlock ecosystem: `tests/redlock_peers.rs` runs
//! it beside the `rslock` crate (in process), redis-py's `Lock` and npm `redlock` (processes of
//! their own, driven by the scripts under `peers/` and installed by `.ci/redlock-peers.sh`).
//! The crate has no code of its own.
