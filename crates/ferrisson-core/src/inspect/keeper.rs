//! The client's waits keeper: writes the waits that have lasted into the client's record (and
//! takes out those that ended), and, with deadlock detection on, looks for the cycles they
//! are in and ends the waits the cycles' rule picks. Idle (asleep until a wait begins) while
//! the client does not wait.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::time::Instant;

use crate::client::Inner;
use crate::metrics::Progress;
use crate::script::{Script, ScriptCall};
use crate::waits::Waits;
use crate::waits::codec::{RecordedHold, RecordedWait};

/// Updating the waits in a client's record (`lua/core/client_waits.lua`).
pub(crate) static CLIENT_WAITS: Script = Script::new(
    "core/client_waits",
    include_str!("../../lua/client_waits.lua"),
);

/// How often an idle keeper looks whether its client is gone.
const IDLE_LOOK: Duration = Duration::from_secs(5);

/// How the keeper paces itself.
#[derive(Debug, Clone, Copy)]
struct Pace {
    /// A wait is written once it has lasted this long (`None`: never).
    record_after: Option<Duration>,
    /// How often the keeper looks while the client waits.
    tick: Duration,
    /// How often it looks for deadlocks (`None`: detection off).
    detect: Option<Duration>,
}

impl Pace {
    fn of(config: &crate::ClientConfig) -> Self {
        let floor = Duration::from_millis(2);
        match (config.deadlock_detection(), config.wait_record_delay()) {
            (Some(interval), _) => {
                let quarter = (interval / 4).max(floor);
                Self {
                    record_after: Some(quarter),
                    tick: quarter,
                    detect: Some((interval / 2).max(Duration::from_millis(5))),
                }
            }
            (None, Some(after)) => Self {
                record_after: Some(after),
                tick: (after / 2).clamp(floor, Duration::from_secs(1)),
                detect: None,
            },
            (None, None) => Self {
                record_after: None,
                tick: IDLE_LOOK,
                detect: None,
            },
        }
    }
}

/// Notes that `progress`'s acquisition on `client` waits for `what` (its first try failed):
/// on record until it ends, when the client keeps a record; the client's keeper starts with
/// its first wait. Noting it again changes nothing.
pub fn note_wait(progress: &Progress, client: &crate::Client, what: crate::waits::WaitFor<'_>) {
    let waits = client.waits();
    progress.waiting(waits, what);
    if let Some(waits) = waits
        && !waits.kept.swap(true, std::sync::atomic::Ordering::AcqRel)
    {
        tokio::spawn(keep(Arc::downgrade(&client.inner), waits.clone()));
    }
}

/// Keeps `waits` on record for the client behind `inner` while it lives.
pub(crate) async fn keep(inner: Weak<Inner>, waits: Arc<Waits>) {
    let mut recorded: HashMap<String, String> = HashMap::new();
    let mut refused = false;
    let mut detected: Option<Instant> = None;
    // Whether a refusal to read the graph was logged (once).
    let mut told = false;
    loop {
        let Some((closing, pace)) = inner.upgrade().map(|i| {
            let client = crate::Client { inner: i };
            (client.inner.closing.clone(), Pace::of(client.config()))
        }) else {
            return;
        };
        let idle = recorded.is_empty() && waits.is_empty();
        // Idle, it looks now and then whether the client is still there (the last clone
        // dropped without a shutdown ends it then).
        let sleep = if idle { IDLE_LOOK } else { pace.tick };
        tokio::select! {
            () = waits.changed.notified(), if idle => continue,
            () = tokio::time::sleep(sleep) => {}
            () = closing.cancelled() => return,
        }
        if idle {
            if inner.strong_count() == 0 {
                return;
            }
            continue;
        }
        let Some(client) = inner.upgrade().map(|inner| crate::Client { inner }) else {
            return;
        };
        if client.is_shut_down() {
            return;
        }
        if !refused && let Some(after) = pace.record_after {
            refused = !write(&client, &waits, &mut recorded, after).await;
        }
        if let Some(every) = pace.detect
            && !recorded.is_empty()
            && detected.is_none_or(|at| at.elapsed() >= every)
        {
            detected = Some(Instant::now());
            match find_deadlocks(&client, &waits).await {
                Ok(()) => {}
                Err(e) if e.is_connection_error() => {
                    tracing::debug!(error = %e, "deadlock detection: the wait graph could not be read");
                }
                Err(e) if !told => {
                    told = true;
                    tracing::warn!(error = %e, "deadlock detection cannot read the wait graph: deadlocks go unfound (grant +scan, and +cluster|slots on a cluster: docs/deployment.md)");
                }
                Err(e) => {
                    tracing::debug!(error = %e, "deadlock detection: the wait graph could not be read")
                }
            }
        }
    }
}

/// The waits that have lasted `record_after`, as the record keeps them (field, value), with
/// the holds of their tasks now.
fn due(client: &crate::Client, waits: &Waits, record_after: Duration) -> HashMap<String, String> {
    let lasting: Vec<_> = waits
        .snapshot()
        .into_iter()
        .filter(|(_, w)| w.started.elapsed() >= record_after)
        .collect();
    let tasks = lasting.iter().map(|(_, w)| w.task).collect();
    let held = client.inner.holds.by_task(&tasks);
    lasting
        .into_iter()
        .map(|(id, w)| {
            let holds = held
                .get(&w.task)
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(|h| RecordedHold {
                    kind: h.kind.to_owned(),
                    key: h.key,
                    owner: h.owner,
                    permits: h.permits,
                })
                .collect();
            let wait = RecordedWait {
                id,
                task: crate::waits::task_text(w.task),
                since_ms: w.since_ms,
                kind: w.kind.to_owned(),
                key: w.key,
                owner: w.owner,
                permits: w.permits,
                limit: w.limit,
                holds,
            };
            (wait.field(), wait.encode())
        })
        .collect()
}

/// Brings the record's waits up to date; `false` when the server refuses the write for good
/// (no write right on `ferrisson_client:*`), which stops recording.
async fn write(
    client: &crate::Client,
    waits: &Waits,
    recorded: &mut HashMap<String, String>,
    record_after: Duration,
) -> bool {
    let due = due(client, waits, record_after);
    let gone: Vec<&String> = recorded.keys().filter(|f| !due.contains_key(*f)).collect();
    let changed: Vec<(&String, &String)> = due
        .iter()
        .filter(|(f, v)| recorded.get(*f) != Some(*v))
        .collect();
    if gone.is_empty() && changed.is_empty() {
        return true;
    }
    let identity = &client.inner.identity;
    let mut call = ScriptCall::new(&CLIENT_WAITS, &[&identity.key()])
        .arg(crate::time::millis(client.config().lease()).max(1))
        .arg(gone.len());
    for field in &gone {
        call = call.arg(field.as_str());
    }
    // The record's own fields too: a record lost meanwhile (a restart) comes back whole.
    call = identity.record_fields(call);
    for (field, value) in &changed {
        call = call.arg(field.as_str()).arg(value.as_str());
    }
    match client.inner.conn.eval(&call).await {
        Ok(_) => {
            *recorded = due;
            true
        }
        Err(e) if crate::error::is_transient(&e) => true,
        Err(e) => {
            tracing::warn!(error = %e, key = identity.key(), "the server refused the client's waits: they stay off the record, and deadlocks they are in go unfound (grant write access to ferrisson_client:*)");
            false
        }
    }
}

/// Reads the wait-for graph and ends each of this client's waits that a cycle picks as its
/// victim, once a second read shows the same cycle with the same victim (a graph read while
/// a wait ended is no deadlock).
async fn find_deadlocks(client: &crate::Client, waits: &Waits) -> crate::Result<()> {
    let mine = |graph: &crate::WaitGraph| -> Vec<(u64, String)> {
        graph
            .cycles
            .iter()
            .filter_map(|cycle| {
                let victim = graph.tasks.get(cycle.victim)?;
                (victim.client_id == client.id() && waits.is_live(cycle.victim_wait))
                    .then(|| (cycle.victim_wait, graph.describe(cycle)))
            })
            .collect()
    };
    let first = mine(&client.wait_graph().await?);
    if first.is_empty() {
        return Ok(());
    }
    let second = mine(&client.wait_graph().await?);
    for (wait, cycle) in second {
        if !first.iter().any(|(w, _)| *w == wait) {
            continue;
        }
        if let Some(kind) = waits.doom(wait, cycle.clone()) {
            crate::metrics::deadlocked(kind);
            tracing::warn!(%cycle, "deadlock: this client's waiter gives way");
        }
    }
    Ok(())
}
