//! The README's snippet for using one synchronizer crate alone (`ferrisson-semaphore`), word
//! for word (`tests/readme.rs` checks that it is the README's and runs it against a real
//! Redis). This crate depends on `ferrisson-semaphore` and nothing else of ferrisson.

#[allow(missing_docs)]
pub mod snippet {
    include!("snippet.rs");
}
