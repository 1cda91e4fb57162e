//! The wait-for graph across processes, and the deadlocks in it: pure, so that every process
//! that reads the same records computes the same cycles and the same victims.
//!
//! Nodes are waiting *tasks* (a client's Tokio task, or its `block_on` future), each with the
//! holds it took and the waits it is in. A wait on a lock is blocked by the tasks holding the
//! lock and by the tasks queued ahead of it (a fair lock): it can go on only once each of them
//! does. A wait on a semaphore is blocked only while the permits that tasks not in the graph
//! hold, with those available, are too few for it: any of them may come back. A task goes on
//! when any one of its waits can (it may be a `select!`): the graph is reduced by every task
//! that can go on, and what is left is deadlocked for certain. Its cycles (strongly connected
//! components) each get one victim, by a rule that depends on the records alone.

/// What a task holds, as its record says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Held {
    /// The object's key.
    pub key: String,
    /// The owner the hold is under (a lock), `None` for permits.
    pub owner: Option<String>,
    /// Permits held (a semaphore), 0 for a lock hold.
    pub permits: u64,
}

/// One wait of a task.
#[derive(Debug, Clone)]
pub(crate) struct GraphWait {
    /// The wait's id in its client (the record's field).
    pub id: u64,
    /// When it began (epoch ms, the waiting client's clock).
    pub since_ms: u64,
    /// The object waited for (an index into [`Graph::objects`]).
    pub object: usize,
    /// The owner that waits (a lock kind).
    pub owner: Option<String>,
    /// The permits it asks for (a semaphore).
    pub permits: u64,
    /// A read-write lock's reader: only a writer blocks it, not other readers.
    pub reads: bool,
}

/// A waiting task.
#[derive(Debug, Clone)]
pub(crate) struct GraphNode {
    /// `<client id>/<task>`: unique across processes, and the tie-break of victims.
    pub id: String,
    /// Its holds.
    pub holds: Vec<Held>,
    /// Its waits.
    pub waits: Vec<GraphWait>,
    /// Whether its client finds deadlocks (a victim is picked among those first).
    pub detects: bool,
}

/// What the graph knows of an object waited for.
#[derive(Debug, Clone)]
pub(crate) enum GraphObject {
    /// A lock: its holders' owners (with whether each holds to read: a read-write lock's
    /// reader), and the owners queued in it, first first.
    Lock {
        key: String,
        holders: Vec<(String, bool)>,
        queue: Vec<String>,
    },
    /// A semaphore: the permits available, and the permits taken when known (a plain
    /// semaphore's layout keeps no holders: known only from its limit).
    Permits {
        key: String,
        available: i64,
        taken: Option<u64>,
    },
    /// Not readable (gone, of an unknown kind): it blocks nobody for certain.
    Unknown,
}

/// The graph read from the records and the objects.
#[derive(Debug, Clone, Default)]
pub(crate) struct Graph {
    pub nodes: Vec<GraphNode>,
    pub objects: Vec<GraphObject>,
}

/// A cycle of waits: the tasks in it (indices into [`Graph::nodes`]) and its victim, the
/// node and the wait that is to fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cycle {
    pub nodes: Vec<usize>,
    pub victim: usize,
    pub victim_wait: u64,
}

/// Whether `holder` (an owner as the layout stores it) is the hold of `owner`: the same, or
/// `owner` followed by `:` and more (a read-write lock's `<owner>:write`, a mutex value that
/// carries a token after its owner).
pub(crate) fn same_owner(holder: &str, owner: &str) -> bool {
    holder == owner
        || holder
            .strip_prefix(owner)
            .is_some_and(|rest| rest.starts_with(':'))
}

impl Graph {
    /// The nodes blocking wait `w` of a node, given which nodes are still `stuck`: `None`
    /// when the wait can go on once the tasks that are not stuck do.
    pub(crate) fn blockers(&self, w: &GraphWait, stuck: &[bool]) -> Option<Vec<usize>> {
        match self.objects.get(w.object)? {
            GraphObject::Unknown => None,
            GraphObject::Lock {
                key,
                holders,
                queue,
            } => {
                let mut by = Vec::new();
                for (holder, reads) in holders {
                    // Its own hold (a re-entry, a writer's read), or a reader's beside a reader.
                    if w.owner.as_deref().is_some_and(|o| same_owner(holder, o))
                        || (w.reads && *reads)
                    {
                        continue;
                    }
                    by.extend(self.holding_lock(key, holder));
                }
                // Queued ahead of it (a fair lock): each of those takes its turn first.
                if let Some(mine) = w.owner.as_deref() {
                    let ahead = queue.iter().take_while(|q| q.as_str() != mine);
                    if queue.iter().any(|q| q == mine) {
                        for q in ahead {
                            by.extend(self.waiting_as(w.object, q));
                        }
                    }
                }
                by.sort_unstable();
                by.dedup();
                by.retain(|&n| stuck.get(n).copied().unwrap_or(false));
                (!by.is_empty()).then_some(by)
            }
            GraphObject::Permits {
                key,
                available,
                taken,
            } => {
                let taken = (*taken)?;
                let mut stuck_hold = 0u64;
                let mut by = Vec::new();
                for (n, node) in self.nodes.iter().enumerate() {
                    let held: u64 = node
                        .holds
                        .iter()
                        .filter(|h| h.owner.is_none() && &h.key == key)
                        .map(|h| h.permits)
                        .fold(0, u64::saturating_add);
                    if held > 0 && stuck.get(n).copied().unwrap_or(false) {
                        stuck_hold = stuck_hold.saturating_add(held);
                        by.push(n);
                    }
                }
                // The permits that can still come back: those available and those held by
                // tasks that go on. Enough for the wait: it is not blocked for certain.
                let coming = i128::from(*available)
                    + i128::from(taken.saturating_sub(stuck_hold.min(taken)));
                if by.is_empty() || coming >= i128::from(w.permits.max(1)) {
                    None
                } else {
                    Some(by)
                }
            }
        }
    }

    /// The nodes that hold the lock at `key` as `holder`.
    fn holding_lock<'a>(
        &'a self,
        key: &'a str,
        holder: &'a str,
    ) -> impl Iterator<Item = usize> + 'a {
        self.nodes.iter().enumerate().filter_map(move |(n, node)| {
            node.holds
                .iter()
                .any(|h| h.key == key && h.owner.as_deref().is_some_and(|o| same_owner(holder, o)))
                .then_some(n)
        })
    }

    /// The nodes waiting on `object` as `owner`.
    fn waiting_as<'a>(&'a self, object: usize, owner: &'a str) -> impl Iterator<Item = usize> + 'a {
        self.nodes.iter().enumerate().filter_map(move |(n, node)| {
            node.waits
                .iter()
                .any(|w| w.object == object && w.owner.as_deref() == Some(owner))
                .then_some(n)
        })
    }

    /// The nodes deadlocked for certain: what is left once every node that can go on is
    /// taken out, again and again.
    pub(crate) fn stuck(&self) -> Vec<bool> {
        let mut stuck: Vec<bool> = self.nodes.iter().map(|n| !n.waits.is_empty()).collect();
        loop {
            let mut changed = false;
            for (n, node) in self.nodes.iter().enumerate() {
                if stuck.get(n).copied().unwrap_or(false)
                    && node
                        .waits
                        .iter()
                        .any(|w| self.blockers(w, &stuck).is_none())
                {
                    if let Some(s) = stuck.get_mut(n) {
                        *s = false;
                    }
                    changed = true;
                }
            }
            if !changed {
                return stuck;
            }
        }
    }

    /// The deadlocks: each cycle of stuck nodes (a strongly connected component with an edge
    /// inside), with its victim: among the nodes whose clients find deadlocks (all of them
    /// when none does), the node whose latest wait began last (ties: the greatest node id),
    /// failing that wait (its latest, ties: the greatest wait id). Sorted by their nodes.
    pub(crate) fn cycles(&self) -> Vec<Cycle> {
        let stuck = self.stuck();
        let edges: Vec<Vec<usize>> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(n, node)| {
                if !stuck.get(n).copied().unwrap_or(false) {
                    return Vec::new();
                }
                let mut to: Vec<usize> = node
                    .waits
                    .iter()
                    .filter_map(|w| self.blockers(w, &stuck))
                    .flatten()
                    .collect();
                to.sort_unstable();
                to.dedup();
                to
            })
            .collect();
        let mut cycles = Vec::new();
        for component in strongly_connected(&edges) {
            let cyclic = component.len() > 1
                || component
                    .first()
                    .is_some_and(|&n| edges.get(n).is_some_and(|e| e.contains(&n)));
            if !cyclic {
                continue;
            }
            let latest = |n: usize| {
                self.nodes.get(n).and_then(|node| {
                    node.waits
                        .iter()
                        .filter(|w| self.blockers(w, &stuck).is_some())
                        .max_by_key(|w| (w.since_ms, w.id))
                        .map(|w| (w.since_ms, node.id.as_str(), w.id))
                })
            };
            // A victim whose client finds deadlocks, when the cycle has one: another client
            // would never act on its verdict.
            let any_detects = component
                .iter()
                .any(|&n| self.nodes.get(n).is_some_and(|node| node.detects));
            let Some((victim, (_, _, wait))) = component
                .iter()
                .filter(|&&n| !any_detects || self.nodes.get(n).is_some_and(|node| node.detects))
                .filter_map(|&n| latest(n).map(|l| (n, l)))
                .max_by(|a, b| (a.1.0, a.1.1).cmp(&(b.1.0, b.1.1)))
            else {
                continue;
            };
            let mut nodes = component.clone();
            nodes.sort_unstable();
            cycles.push(Cycle {
                nodes,
                victim,
                victim_wait: wait,
            });
        }
        cycles.sort_by(|a, b| a.nodes.cmp(&b.nodes));
        cycles
    }
}

/// The strongly connected components of the graph `edges` (Tarjan's, without recursion).
fn strongly_connected(edges: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let n = edges.len();
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0usize; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut components = Vec::new();
    let mut next = 0usize;
    for root in 0..n {
        if index.get(root).copied() != Some(usize::MAX) {
            continue;
        }
        // (node, next edge to look at)
        let mut work = vec![(root, 0usize)];
        while let Some(&mut (v, ref mut at)) = work.last_mut() {
            if *at == 0 && index.get(v).copied() == Some(usize::MAX) {
                set(&mut index, v, next);
                set(&mut low, v, next);
                next = next.saturating_add(1);
                stack.push(v);
                set(&mut on_stack, v, true);
            }
            let out = edges.get(v).map_or(&[][..], Vec::as_slice);
            if let Some(&w) = out.get(*at) {
                *at = at.saturating_add(1);
                if index.get(w).copied() == Some(usize::MAX) {
                    work.push((w, 0));
                } else if on_stack.get(w).copied().unwrap_or(false) {
                    let m = low[v].min(index[w]);
                    set(&mut low, v, m);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                let m = low[parent].min(low[v]);
                set(&mut low, parent, m);
            }
            if low.get(v) == index.get(v) {
                let mut component = Vec::new();
                while let Some(w) = stack.pop() {
                    set(&mut on_stack, w, false);
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                components.push(component);
            }
        }
    }
    components
}

fn set<T>(v: &mut [T], i: usize, value: T) {
    if let Some(slot) = v.get_mut(i) {
        *slot = value;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock(key: &str, holders: &[&str]) -> GraphObject {
        GraphObject::Lock {
            key: key.into(),
            holders: holders.iter().map(|h| ((*h).to_owned(), false)).collect(),
            queue: Vec::new(),
        }
    }

    fn holds(key: &str, owner: &str) -> Held {
        Held {
            key: key.into(),
            owner: Some(owner.into()),
            permits: 0,
        }
    }

    fn wait(id: u64, since_ms: u64, object: usize, owner: &str) -> GraphWait {
        GraphWait {
            id,
            since_ms,
            object,
            owner: Some(owner.into()),
            permits: 0,
            reads: false,
        }
    }

    fn node(id: &str, holds: Vec<Held>, waits: Vec<GraphWait>) -> GraphNode {
        GraphNode {
            id: id.into(),
            holds,
            waits,
            detects: false,
        }
    }

    /// a holds A and waits for B; b holds B and waits for A.
    fn two_cycle() -> Graph {
        Graph {
            objects: vec![lock("A", &["a:1"]), lock("B", &["b:1"])],
            nodes: vec![
                node("a/1", vec![holds("A", "a:1")], vec![wait(1, 100, 1, "a:2")]),
                node("b/1", vec![holds("B", "b:1")], vec![wait(7, 200, 0, "b:2")]),
            ],
        }
    }

    #[test]
    fn a_two_task_cycle_has_one_victim_the_later_waiter() {
        let cycles = two_cycle().cycles();
        assert_eq!(
            cycles,
            vec![Cycle {
                nodes: vec![0, 1],
                victim: 1,
                victim_wait: 7
            }]
        );
    }

    #[test]
    fn the_victim_is_a_task_whose_client_finds_deadlocks() {
        let mut g = two_cycle();
        // Only a's client detects: a gives way, though b's wait began later.
        g.nodes[0].detects = true;
        let cycles = g.cycles();
        assert_eq!((cycles[0].victim, cycles[0].victim_wait), (0, 1));
        // Both detect: the later waiter again.
        g.nodes[1].detects = true;
        assert_eq!(g.cycles()[0].victim, 1);
    }

    #[test]
    fn a_holder_that_goes_on_breaks_no_cycle() {
        let mut g = two_cycle();
        // b holds B under another owner than the one in the lock: B's holder is no task
        // that waits.
        g.objects[1] = lock("B", &["c:9"]);
        assert!(g.cycles().is_empty());
        assert_eq!(g.stuck(), vec![false, false]);
    }

    #[test]
    fn a_task_with_a_wait_that_can_go_on_is_not_stuck() {
        let mut g = two_cycle();
        g.objects.push(lock("C", &[]));
        g.nodes[0].waits.push(wait(2, 300, 2, "a:3"));
        assert!(g.cycles().is_empty());
    }

    #[test]
    fn a_chain_into_a_cycle_is_stuck_but_no_victim() {
        let mut g = two_cycle();
        // c waits for A, held by a: stuck behind the cycle, not in it.
        g.nodes
            .push(node("c/1", vec![], vec![wait(3, 999, 0, "c:1")]));
        assert_eq!(g.stuck(), vec![true, true, true]);
        let cycles = g.cycles();
        assert_eq!(cycles.len(), 1);
        assert_eq!(cycles[0].nodes, vec![0, 1]);
        assert_eq!(cycles[0].victim, 1);
    }

    #[test]
    fn a_semaphore_blocks_only_when_every_permit_is_held_by_stuck_tasks() {
        // a holds lock A and waits for the semaphore S (1 permit asked); b holds 1 permit
        // of S and waits for A.
        let sem = |available, taken| GraphObject::Permits {
            key: "S".into(),
            available,
            taken,
        };
        let permit = Held {
            key: "S".into(),
            owner: None,
            permits: 1,
        };
        let mut g = Graph {
            objects: vec![lock("A", &["a:1"]), sem(0, Some(1))],
            nodes: vec![
                node(
                    "a/1",
                    vec![holds("A", "a:1")],
                    vec![GraphWait {
                        id: 1,
                        since_ms: 1,
                        object: 1,
                        owner: None,
                        permits: 1,
                        reads: false,
                    }],
                ),
                node("b/1", vec![permit], vec![wait(2, 2, 0, "b:1")]),
            ],
        };
        assert_eq!(g.cycles().len(), 1);
        // Two permits taken, one by a task that is not waiting: it may come back.
        g.objects[1] = sem(0, Some(2));
        assert!(g.cycles().is_empty());
        // A limit unknown: the layout cannot tell who holds the rest.
        g.objects[1] = sem(0, None);
        assert!(g.cycles().is_empty());
    }

    #[test]
    fn a_fair_queue_blocks_its_later_waiters() {
        // F held by b; queued: c, then a. a holds A; b waits for A; c waits for F only.
        let fair = |holders: &[&str]| GraphObject::Lock {
            key: "F".into(),
            holders: holders.iter().map(|h| ((*h).to_owned(), false)).collect(),
            queue: vec!["c:1".into(), "a:2".into()],
        };
        let mut g = Graph {
            objects: vec![lock("A", &["a:1"]), fair(&["b:1"])],
            nodes: vec![
                node("a/1", vec![holds("A", "a:1")], vec![wait(1, 5, 1, "a:2")]),
                node("b/1", vec![holds("F", "b:1")], vec![wait(2, 6, 0, "b:2")]),
                node("c/1", vec![], vec![wait(3, 7, 1, "c:1")]),
            ],
        };
        let cycles = g.cycles();
        assert_eq!(cycles.len(), 1, "{cycles:?}");
        assert_eq!(cycles[0].nodes, vec![0, 1, 2]);
        assert_eq!((cycles[0].victim, cycles[0].victim_wait), (2, 3));
        // F free: c takes its turn, then a: nobody is stuck (b waits for A, which a gives
        // back once it has F).
        g.objects[1] = fair(&[]);
        g.nodes[1].holds.clear();
        assert_eq!(g.stuck(), vec![false, false, false]);
        assert!(g.cycles().is_empty());
    }

    #[test]
    fn a_reader_waits_for_the_writer_only() {
        // a reads R and waits for A; b holds A and waits to read R: readers share, so no
        // cycle; b waiting to write R: a cycle.
        let mut g = Graph {
            objects: vec![
                lock("A", &["b:1"]),
                GraphObject::Lock {
                    key: "R".into(),
                    holders: vec![("a:1".into(), true)],
                    queue: Vec::new(),
                },
            ],
            nodes: vec![
                node("a/1", vec![holds("R", "a:1")], vec![wait(1, 1, 0, "a:2")]),
                node(
                    "b/1",
                    vec![holds("A", "b:1")],
                    vec![GraphWait {
                        reads: true,
                        ..wait(2, 2, 1, "b:2")
                    }],
                ),
            ],
        };
        assert!(g.cycles().is_empty());
        g.nodes[1].waits[0].reads = false;
        assert_eq!(g.cycles().len(), 1);
    }

    #[test]
    fn owners_match_their_holds_under_suffixes() {
        assert!(same_owner("c:1", "c:1"));
        assert!(same_owner("c:1:write", "c:1"));
        assert!(!same_owner("c:12", "c:1"));
        assert!(!same_owner("c:1", "c:12"));
    }

    #[test]
    fn components_are_found_without_recursion() {
        let edges = vec![vec![1], vec![2], vec![0], vec![3], vec![]];
        let mut comps: Vec<Vec<usize>> = strongly_connected(&edges)
            .into_iter()
            .map(|mut c| {
                c.sort_unstable();
                c
            })
            .collect();
        comps.sort();
        assert_eq!(comps, vec![vec![0, 1, 2], vec![3], vec![4]]);
        // A long chain does not overflow the stack.
        let chain: Vec<Vec<usize>> = (0..100_000).map(|i| vec![i + 1]).chain([vec![]]).collect();
        assert_eq!(strongly_connected(&chain).len(), 100_001);
    }
}
