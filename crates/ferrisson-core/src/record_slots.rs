//! The slots of a client's records (`crate::record`), one pool per object, kept by the client.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Instant;

/// The slots of one object's record, shared by every handle of the object on one client.
#[derive(Debug, Default)]
pub(crate) struct Slots(pub(crate) Mutex<SlotState>);

#[derive(Debug, Default)]
pub(crate) struct SlotState {
    /// Slots whose calls have settled.
    pub(crate) free: Vec<u32>,
    /// Slots of calls sent more than once, and when they may be used again.
    pub(crate) resting: VecDeque<(Instant, u32)>,
    /// The next slot never used.
    pub(crate) next: u32,
    /// When a call last asked Redis to set the record's TTL.
    pub(crate) refreshed: Option<Instant>,
}

/// A client's slot pools, by record key. An entry lives while a handle of its object does.
#[derive(Debug, Default)]
pub(crate) struct RecordPools(Mutex<HashMap<String, Weak<Slots>>>);

impl RecordPools {
    /// The pool of the record at `key`, made on first use.
    pub(crate) fn slots(&self, key: &str) -> Arc<Slots> {
        let mut pools = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(slots) = pools.get(key).and_then(Weak::upgrade) {
            return slots;
        }
        // Forget the pools of objects no handle uses any more.
        pools.retain(|_, slots| slots.strong_count() > 0);
        let slots = Arc::new(Slots::default());
        pools.insert(key.to_owned(), Arc::downgrade(&slots));
        slots
    }
}
