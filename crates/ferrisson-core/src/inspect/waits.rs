//! The wait-for graph across processes ([`Client::wait_graph`]): the waits on record of every
//! client (`crate::waits`), the holders and queues of what they wait for, and the cycles.

use super::*;
use crate::waits::codec::RecordedWait;
use crate::waits::graph::{Graph, GraphNode, GraphObject, GraphWait, Held};

/// Something a waiting task holds, as its record lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskHold {
    /// The kind as its metrics name it (`lock`, `fair_lock`, `semaphore`, …).
    pub kind: String,
    /// The object's key.
    pub key: String,
    /// The owner it holds as (a lock kind).
    pub owner: Option<String>,
    /// Permits held (a semaphore; 0 for a lock).
    pub permits: u64,
}

/// One wait of a task.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskWait {
    /// Its id in its client.
    pub id: u64,
    /// The kind as its metrics name it.
    pub kind: String,
    /// The object's key.
    pub key: String,
    /// The owner that waits (a lock kind).
    pub owner: Option<String>,
    /// Permits asked for (a semaphore).
    pub permits: Option<u32>,
    /// When it began (its client's clock).
    pub since: SystemTime,
    /// The owners holding the object as its layout says (a lock kind).
    pub holders: Vec<String>,
    /// The owners queued ahead of it, first first (a fair lock's queue), whoever they are
    /// (a Redisson waiter included).
    pub queued_ahead: Vec<String>,
    /// The waiting tasks ([`WaitGraph::tasks`]) it waits for: those holding the object and
    /// those queued ahead of it.
    pub blocked_by: Vec<usize>,
}

/// A task of some client that waits.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WaitingTask {
    /// `<client id>/<task>`.
    pub id: String,
    /// The client's id.
    pub client_id: String,
    /// The Tokio task's id in its process, or `thread-<n>` outside a task (a runtime's
    /// `block_on`, the blocking API).
    pub task: String,
    /// Who the client is.
    pub party: Party,
    /// What the task holds.
    pub holds: Vec<TaskHold>,
    /// What it waits for.
    pub waits: Vec<TaskWait>,
    /// Whether it is deadlocked for certain: in a cycle, or waiting behind one.
    pub deadlocked: bool,
    /// Whether its client finds deadlocks ([`ClientConfig::with_deadlock_detection`](crate::ClientConfig::with_deadlock_detection)).
    pub detects: bool,
}

/// A cycle of waits: each task holds what the next one waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WaitCycle {
    /// The tasks in it ([`WaitGraph::tasks`]).
    pub tasks: Vec<usize>,
    /// The task chosen to give way: the one whose latest wait began last.
    pub victim: usize,
    /// The wait of the victim that fails ([`TaskWait::id`]).
    pub victim_wait: u64,
}

/// The wait-for graph across processes ([`Client::wait_graph`]).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct WaitGraph {
    /// Every task on record as waiting, by client and task.
    pub tasks: Vec<WaitingTask>,
    /// The cycles among them (deadlocks), each with its victim.
    pub cycles: Vec<WaitCycle>,
}

impl WaitGraph {
    /// A line for people naming the cycle: each task (application, host, pid, task), what it
    /// holds that the previous one waits for, and what it waits for.
    pub fn describe(&self, cycle: &WaitCycle) -> String {
        let parts: Vec<String> = self
            .cycle_order(cycle)
            .into_iter()
            .filter_map(|t| self.tasks.get(t).map(|task| (t, task)))
            .map(|(t, task)| {
                let waits: Vec<String> = task
                    .waits
                    .iter()
                    .filter(|w| w.blocked_by.iter().any(|b| cycle.tasks.contains(b)))
                    .map(|w| format!("waits for {} `{}`", w.kind.replace('_', " "), w.key))
                    .collect();
                let holds: Vec<String> = task
                    .holds
                    .iter()
                    .map(|h| format!("{} `{}`", h.kind.replace('_', " "), h.key))
                    .collect();
                let victim = if t == cycle.victim { " [victim]" } else { "" };
                format!(
                    "{} task {}{victim} holds {} and {}",
                    task.party.describe(),
                    task.task,
                    if holds.is_empty() {
                        "nothing".to_owned()
                    } else {
                        holds.join(", ")
                    },
                    waits.join(", ")
                )
            })
            .collect();
        parts.join(" -> ")
    }

    /// The cycle's tasks in the order of their waits: from the victim, each followed by one
    /// it waits for, then any left.
    fn cycle_order(&self, cycle: &WaitCycle) -> Vec<usize> {
        let mut order = vec![cycle.victim];
        let mut at = cycle.victim;
        while let Some(next) = self.tasks.get(at).and_then(|task| {
            task.waits
                .iter()
                .flat_map(|w| w.blocked_by.iter().copied())
                .find(|b| cycle.tasks.contains(b) && !order.contains(b))
        }) {
            order.push(next);
            at = next;
        }
        order.extend(
            cycle
                .tasks
                .iter()
                .filter(|t| !order.contains(t))
                .collect::<Vec<_>>(),
        );
        order
    }
}

/// Whether a client record is a live client's: its time to live never falls more than a
/// refresh period and a half below its lease while the client lives (it refreshes it every
/// period); a dead client's waits would show until the record expires, a lease later.
fn is_live(fields: &HashMap<String, String>, pttl: i64) -> bool {
    let ms = |f: &str| fields.get(f).and_then(|v| v.parse::<i64>().ok());
    match (ms("lease"), ms("period")) {
        _ if pttl == -2 => false,
        (Some(lease), Some(period)) if pttl >= 0 => {
            pttl >= lease.saturating_sub(period.saturating_add(period / 2))
        }
        // No expiry, or a record of a version that does not say: taken as live.
        _ => true,
    }
}

/// The object kind whose layout a waiting kind (as its metrics name it) keeps.
fn layout_kind(kind: &str) -> Option<ObjectKind> {
    match kind {
        "lock" => Some(ObjectKind::Lock),
        "semaphore" => Some(ObjectKind::Semaphore),
        "read_lock" | "write_lock" => "rwlock".parse().ok(),
        other => other.replace('_', "-").parse().ok(),
    }
}

impl Client {
    /// The wait-for graph across processes **\[ext\]**: every task that a ferrisson client
    /// records as waiting (a wait is on record once it has lasted
    /// [`WAIT_RECORD_AFTER`](crate::WAIT_RECORD_AFTER), or a quarter of the deadlock detection's
    /// interval), what it holds, what it waits for and who holds that, and the cycles among
    /// them with the victim each cycle's rule picks. What `ferrisson waits` shows.
    ///
    /// Read-only: one `SCAN` of the client records (on every primary of a cluster), then
    /// each record and each object waited for.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// # Errors
    ///
    /// Redis errors.
    pub async fn wait_graph(&self) -> Result<WaitGraph> {
        let nodes = self.inner.conn.scan_nodes().await.map_err(Error::Redis)?;
        let pattern = format!("{RECORD_PREFIX}:*");
        let pages: Vec<Result<Vec<String>>> = futures::stream::iter(nodes)
            .map(|node| super::list::scan_pages(self, node, pattern.clone(), "hash"))
            .flatten()
            .collect()
            .await;
        let mut keys = Vec::new();
        for page in pages {
            keys.extend(page?);
        }
        keys.sort_unstable();
        keys.dedup();
        let reads = keys.iter().map(|key| self.record_fields(key));
        let mut records = Vec::new();
        for read in futures::future::join_all(reads).await {
            // Gone or changed type between the scan and the read: no record.
            if let Some((fields, pttl)) = read?
                && is_live(&fields, pttl)
            {
                records.push(fields);
            }
        }
        self.graph_of(records).await
    }

    /// The graph of the waits in `records` (each a client record's fields).
    async fn graph_of(&self, records: Vec<HashMap<String, String>>) -> Result<WaitGraph> {
        let mut tasks: Vec<WaitingTask> = Vec::new();
        let mut by_id: HashMap<String, usize> = HashMap::new();
        let mut waits: Vec<(usize, RecordedWait)> = Vec::new();
        for fields in records {
            let recorded: Vec<RecordedWait> = fields
                .iter()
                .filter_map(|(f, v)| RecordedWait::decode(f, v))
                .collect();
            if recorded.is_empty() {
                continue;
            }
            let detects = fields.get("detects").is_some_and(|d| d == "1");
            let Some(record) = record_of(fields, -2) else {
                continue;
            };
            for wait in recorded {
                let id = format!("{}/{}", record.id, wait.task);
                let t = *by_id.entry(id.clone()).or_insert_with(|| {
                    tasks.push(WaitingTask {
                        id,
                        client_id: record.id.clone(),
                        task: wait.task.clone(),
                        party: Party::Ferrisson(record.clone()),
                        holds: Vec::new(),
                        waits: Vec::new(),
                        deadlocked: false,
                        detects,
                    });
                    tasks.len().saturating_sub(1)
                });
                waits.push((t, wait));
            }
        }
        // The holds of a task are those its latest recorded wait lists.
        waits.sort_by_key(|(t, w)| (*t, w.id));
        for (t, wait) in &waits {
            if let Some(task) = tasks.get_mut(*t) {
                task.holds = wait
                    .holds
                    .iter()
                    .map(|h| TaskHold {
                        kind: h.kind.clone(),
                        key: h.key.clone(),
                        owner: h.owner.clone(),
                        permits: h.permits,
                    })
                    .collect();
            }
        }
        // Each object waited for, read once.
        let mut objects: Vec<(String, String, Option<u32>)> = Vec::new();
        for (_, w) in &waits {
            match objects.iter_mut().find(|(k, _, _)| *k == w.key) {
                Some(seen) => seen.2 = seen.2.or(w.limit),
                None => objects.push((w.key.clone(), w.kind.clone(), w.limit)),
            }
        }
        let read = objects.iter().map(|(key, kind, limit)| async move {
            let Some(kind) = layout_kind(kind) else {
                return GraphObject::Unknown;
            };
            // The layout alone: who stands behind an owner comes from the records read
            // already, and the subscribers are no business of the graph (nor its user's right:
            // `PUBSUB NUMSUB` is an operator's command).
            match self.read_layout(key.clone(), Some(kind)).await {
                Ok(info) if kind.is_lock() => {
                    let mut queue = info.waiters.clone();
                    queue.sort_by_key(|w| w.place);
                    GraphObject::Lock {
                        key: key.clone(),
                        holders: info
                            .holders
                            .iter()
                            .map(|h| (h.owner.clone(), h.mode == HoldMode::Read))
                            .collect(),
                        queue: queue.into_iter().map(|w| w.owner).collect(),
                    }
                }
                Ok(info) => match info.permits {
                    Some(p) => GraphObject::Permits {
                        key: key.clone(),
                        available: p.available,
                        taken: p.taken.or_else(|| {
                            limit.map(|l| {
                                u64::try_from(i64::from(l).saturating_sub(p.available))
                                    .unwrap_or(0)
                            })
                        }),
                    },
                    None => GraphObject::Unknown,
                },
                Err(e) => {
                    tracing::debug!(key, error = %e, "wait graph: the object waited for could not be read");
                    GraphObject::Unknown
                }
            }
        });
        let graph_objects = futures::future::join_all(read).await;
        let mut graph = Graph {
            objects: graph_objects,
            nodes: tasks
                .iter()
                .map(|t| GraphNode {
                    id: t.id.clone(),
                    holds: t
                        .holds
                        .iter()
                        .map(|h| Held {
                            key: h.key.clone(),
                            owner: h.owner.clone(),
                            permits: h.permits,
                        })
                        .collect(),
                    waits: Vec::new(),
                    detects: t.detects,
                })
                .collect(),
        };
        for (t, w) in &waits {
            let object = objects
                .iter()
                .position(|(k, _, _)| *k == w.key)
                .unwrap_or(usize::MAX);
            if let Some(node) = graph.nodes.get_mut(*t) {
                node.waits.push(GraphWait {
                    id: w.id,
                    since_ms: w.since_ms,
                    object,
                    owner: w.owner.clone(),
                    permits: u64::from(w.permits.unwrap_or(0)),
                    reads: w.kind == "read_lock",
                });
            }
        }
        let everyone = vec![true; graph.nodes.len()];
        for (t, w) in &waits {
            let Some(node) = graph.nodes.get(*t) else {
                continue;
            };
            let Some(gw) = node.waits.iter().find(|g| g.id == w.id) else {
                continue;
            };
            let (holders, queued_ahead) = match graph.objects.get(gw.object) {
                Some(GraphObject::Lock { holders, queue, .. }) => {
                    let mine = w.owner.as_deref();
                    let ahead = if queue.iter().any(|q| Some(q.as_str()) == mine) {
                        queue
                            .iter()
                            .take_while(|q| Some(q.as_str()) != mine)
                            .cloned()
                            .collect()
                    } else {
                        Vec::new()
                    };
                    (holders.iter().map(|(h, _)| h.clone()).collect(), ahead)
                }
                _ => (Vec::new(), Vec::new()),
            };
            let blocked_by = graph.blockers(gw, &everyone).unwrap_or_default();
            if let Some(task) = tasks.get_mut(*t) {
                task.waits.push(TaskWait {
                    id: w.id,
                    kind: w.kind.clone(),
                    key: w.key.clone(),
                    owner: w.owner.clone(),
                    permits: w.permits,
                    since: UNIX_EPOCH + Duration::from_millis(w.since_ms),
                    holders,
                    queued_ahead,
                    blocked_by,
                });
            }
        }
        let stuck = graph.stuck();
        for (task, stuck) in tasks.iter_mut().zip(stuck) {
            task.deadlocked = stuck;
        }
        let cycles = graph
            .cycles()
            .into_iter()
            .map(|c| WaitCycle {
                tasks: c.nodes,
                victim: c.victim,
                victim_wait: c.victim_wait,
            })
            .collect();
        Ok(WaitGraph { tasks, cycles })
    }
}
