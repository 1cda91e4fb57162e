//! Waits on record **\[ext\]** (docs/protocol.md, "[ext] Waits on record"): which of the
//! client's tasks wait for what, and what they hold, kept in memory while they wait and
//! written into the client's record once a wait has lasted a while, so that operators see the
//! wait-for graph across processes (`Client::wait_graph`, `ferrisson waits`) and, with
//! [`ClientConfig::with_deadlock_detection`](crate::ClientConfig::with_deadlock_detection),
//! the client finds the cycles its waits are in and fails one waiter per cycle with
//! [`Error::Deadlock`](crate::Error::Deadlock).
//!
//! Nothing happens on an acquisition that does not wait: a wait registers here when its first
//! try failed, and only waits older than the record delay reach Redis.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

use crate::owner::Owner;

pub(crate) mod codec;
pub(crate) mod graph;

/// How long a wait lasts before it is written into the client's record, when deadlock
/// detection is off (with it on: a quarter of its interval).
pub const WAIT_RECORD_AFTER: Duration = Duration::from_secs(1);

/// The task a wait or a hold belongs to: a Tokio task, or the thread a runtime's `block_on`
/// runs on (which has no task id: `#[tokio::main]`'s future, the blocking API's calls).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Task {
    Tokio(tokio::task::Id),
    Thread(std::thread::ThreadId),
}

/// The task this runs in.
pub(crate) fn current_task() -> Task {
    tokio::task::try_id().map_or_else(|| Task::Thread(std::thread::current().id()), Task::Tokio)
}

/// The task as a record writes it: the Tokio task's id, or `thread-<n>` for a `block_on`.
pub(crate) fn task_text(task: Task) -> String {
    match task {
        Task::Tokio(id) => id.to_string(),
        Task::Thread(thread) => {
            let debug = format!("{thread:?}");
            let digits: String = debug.chars().filter(char::is_ascii_digit).collect();
            format!("thread-{digits}")
        }
    }
}

/// What a waiting acquisition waits for.
#[derive(Debug, Clone, Copy)]
pub struct WaitFor<'a> {
    /// The kind as its metrics name it (`lock`, `fair_lock`, `write_lock`, `semaphore`, …).
    pub kind: &'static str,
    /// The object's key.
    pub key: &'a str,
    /// The owner that waits (a lock kind).
    pub owner: Option<&'a Owner>,
    /// The permits it asks for (a semaphore).
    pub permits: Option<u32>,
    /// The semaphore's limit, when the handle has one: with it, the permits taken are known
    /// (the limit less those available), and a wait on it can be found in a deadlock.
    pub limit: Option<u32>,
}

/// A wait the client's task is in.
#[derive(Debug, Clone)]
pub(crate) struct LiveWait {
    pub(crate) task: Task,
    pub(crate) since_ms: u64,
    pub(crate) started: Instant,
    pub(crate) kind: &'static str,
    pub(crate) key: String,
    pub(crate) owner: Option<String>,
    pub(crate) permits: Option<u32>,
    pub(crate) limit: Option<u32>,
    /// The acquisition's verdict, which ends it.
    doom: Arc<Doom>,
}

/// The client's waits.
#[derive(Default)]
pub(crate) struct Waits {
    next: AtomicU64,
    /// Whether the keeper of these waits runs (started at the first wait).
    pub(crate) kept: std::sync::atomic::AtomicBool,
    live: Mutex<HashMap<u64, LiveWait>>,
    /// Told when a wait begins or ends.
    pub(crate) changed: tokio::sync::Notify,
}

impl Waits {
    fn live(&self) -> std::sync::MutexGuard<'_, HashMap<u64, LiveWait>> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The waits now, by id.
    pub(crate) fn snapshot(&self) -> Vec<(u64, LiveWait)> {
        let mut all: Vec<(u64, LiveWait)> =
            self.live().iter().map(|(id, w)| (*id, w.clone())).collect();
        all.sort_unstable_by_key(|(id, _)| *id);
        all
    }

    /// Whether no wait is on.
    pub(crate) fn is_empty(&self) -> bool {
        self.live().is_empty()
    }

    /// Whether wait `id` is still on.
    pub(crate) fn is_live(&self, id: u64) -> bool {
        self.live().contains_key(&id)
    }

    /// Ends wait `id` with a deadlock: its acquisition fails with `why`. Its kind, `None`
    /// when it ended meanwhile.
    pub(crate) fn doom(&self, id: u64, why: String) -> Option<&'static str> {
        let (doom, kind) = self.live().get(&id).map(|w| (w.doom.clone(), w.kind))?;
        doom.doom(why);
        Some(kind)
    }

    /// Registers a wait for `what` of the task this runs in; it lasts as long as the ticket.
    pub(crate) fn register(self: &Arc<Self>, what: WaitFor<'_>) -> WaitTicket {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let since_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let doom = Arc::new(Doom::default());
        self.live().insert(
            id,
            LiveWait {
                task: current_task(),
                since_ms,
                started: Instant::now(),
                kind: what.kind,
                key: what.key.to_owned(),
                owner: what.owner.map(|o| o.as_str().to_owned()),
                permits: what.permits,
                limit: what.limit,
                doom: doom.clone(),
            },
        );
        self.changed.notify_one();
        WaitTicket {
            waits: Arc::downgrade(self),
            id,
            doom,
        }
    }

    fn remove(&self, id: u64) {
        if self.live().remove(&id).is_some() {
            self.changed.notify_one();
        }
    }
}

/// A wait's registration; dropping it ends the wait.
#[derive(Debug)]
pub(crate) struct WaitTicket {
    waits: Weak<Waits>,
    id: u64,
    /// The verdict on the wait.
    pub(crate) doom: Arc<Doom>,
}

impl Drop for WaitTicket {
    fn drop(&mut self) {
        if let Some(waits) = self.waits.upgrade() {
            waits.remove(self.id);
        }
    }
}

/// A deadlock verdict on an acquisition, and the wake-up of whoever waits for one.
#[derive(Debug, Default)]
pub(crate) struct Doom {
    verdict: OnceLock<String>,
    woken: tokio::sync::Notify,
}

impl Doom {
    fn doom(&self, why: String) {
        if self.verdict.set(why).is_ok() {
            self.woken.notify_waiters();
        }
    }

    /// The verdict, once there is one.
    pub(crate) async fn verdict(&self) -> String {
        loop {
            let woken = self.woken.notified();
            if let Some(why) = self.verdict.get() {
                return why.clone();
            }
            woken.await;
        }
    }
}
