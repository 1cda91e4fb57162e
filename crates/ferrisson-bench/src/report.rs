//! The printed table, the JSON file and the SVG chart.

use std::fmt::Write as _;

use crate::record::{Record, Records};

/// A target's bound.
#[derive(Debug, Clone, Copy)]
pub enum Bound {
    AtLeast(f64),
    Above(f64),
    AtMost(f64),
}

impl Bound {
    /// Whether `value` meets the bound.
    pub fn holds(self, value: f64) -> bool {
        match self {
            Self::AtLeast(b) => value >= b,
            Self::Above(b) => value > b,
            Self::AtMost(b) => value <= b,
        }
    }
}

impl std::fmt::Display for Bound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::AtLeast(b) => write!(f, ">= {b}"),
            Self::Above(b) => write!(f, "> {b}"),
            Self::AtMost(b) => write!(f, "<= {b}"),
        }
    }
}

/// One target of `docs/benchmarks.md` checked against a run.
pub struct Target {
    pub what: String,
    pub value: f64,
    pub bound: Bound,
    /// The ceiling of the same figure, where the run measured one: for the comparisons with
    /// rslock on uncontended locks, the bare script calls (the Redisson layout's two calls per
    /// lock + unlock with redis-rs and nothing around them, in the same rounds); for the
    /// contended ones, the hand-off ceiling (the hold plus one round trip per acquisition). A
    /// bound past it is past what this layout, driver and machine allow.
    pub reach: Option<f64>,
}

impl Target {
    pub fn met(&self) -> bool {
        self.bound.holds(self.value)
    }

    /// Whether the bound lies past the ceiling: no change to ferrisson can meet it here.
    pub fn past_ceiling(&self) -> bool {
        self.reach.is_some_and(|r| !self.bound.holds(r))
    }
}

/// The targets of `docs/benchmarks.md`, checked against a run. The bench reports them; it
/// never fails on one.
pub fn targets(records: &Records) -> Vec<Target> {
    let mut out = Vec::new();
    let mut add = |what: String, value: Option<f64>, bound: Bound, reach: Option<f64>| {
        if let Some(value) = value {
            out.push(Target {
                what,
                value,
                bound,
                reach,
            });
        }
    };
    let u = |variant: &str, metric: &str| records.get("uncontended", variant, "ferrisson", metric);
    let bare = |variant: &str, metric: &str| {
        records.get(
            "uncontended",
            variant,
            crate::scenarios::raw::RAW_LIBRARY,
            metric,
        )
    };
    for variant in ["tasks=64", "tasks=256"] {
        add(
            format!("uncontended {variant} / rslock, alternating rounds"),
            u(variant, "ratio_to_rslock"),
            Bound::AtLeast(1.2),
            bare(variant, "ratio_to_rslock"),
        );
    }
    add(
        "uncontended tasks=256 / server ceiling".to_owned(),
        u("tasks=256", "ratio_to_server_ceiling"),
        Bound::AtLeast(0.5),
        None,
    );
    add(
        "uncontended tasks=256 / raw calls, alternating rounds".to_owned(),
        u("tasks=256", "ratio_to_raw"),
        Bound::AtLeast(0.8),
        None,
    );
    let rslock = crate::scenarios::rslock_peer::LIBRARY;
    let handoff = crate::scenarios::rslock_peer::HANDOFF_CEILING;
    for hold in ["hold=0ms", "hold=1ms"] {
        add(
            format!("contended {hold} / rslock, alternating rounds"),
            records.get("contended", hold, rslock, "ferrisson_ratio_interleaved"),
            Bound::AtLeast(1.2),
            records.get("contended", hold, handoff, "ratio_to_rslock"),
        );
    }
    let semaphore = "permits=20,tasks=200";
    let npm = records
        .0
        .iter()
        .find(|r| {
            r.scenario == "semaphore"
                && r.metric == "acquisitions_per_sec"
                && !r.library.starts_with("ferrisson")
        })
        .map(|r| r.value);
    for kind in ["ferrisson-semaphore", "ferrisson-expirable-semaphore"] {
        // Head to head when the run had the peer for it; else the separate phases.
        match records.get("semaphore", semaphore, kind, "ratio_to_npm_interleaved") {
            Some(ratio) => add(
                format!("{kind} / npm redis-semaphore, alternating rounds"),
                Some(ratio),
                Bound::AtLeast(1.5),
                None,
            ),
            None => {
                let ours = records.get("semaphore", semaphore, kind, "acquisitions_per_sec");
                add(
                    format!("{kind} / npm redis-semaphore"),
                    ours.zip(npm).map(|(a, b)| a / b.max(1e-9)),
                    Bound::AtLeast(1.5),
                    None,
                );
            }
        }
    }
    for (variant, ratio, ceiling) in [
        (
            "uncontended tasks=16",
            "RedLock uncontended / rslock, alternating rounds",
            crate::scenarios::raw::RAW_LIBRARY,
        ),
        (
            "contended hold=0ms",
            "RedLock contended / rslock, alternating rounds",
            handoff,
        ),
    ] {
        let r = records.get("redlock", variant, "ferrisson", "ratio_to_rslock");
        if let Some(v) = r {
            let reach = records.get("redlock", variant, ceiling, "ratio_to_rslock");
            add(ratio.to_owned(), Some(v), Bound::Above(1.0), reach);
        }
    }
    add(
        "uncontended sequential p50 / rslock p50".to_owned(),
        u("sequential", "p50_ratio_to_rslock"),
        Bound::AtMost(1.0),
        bare("sequential", "p50_ratio_to_rslock"),
    );
    // The lean mutex: the standard Redlock layout, head to head with rslock, with #56's bounds.
    let mutex = crate::scenarios::lock_kinds::MUTEX;
    let m = |variant: &str, metric: &str| records.get("uncontended", variant, mutex, metric);
    // The mutex layout's bare calls (its ceiling), in the same rounds.
    let mbare = |variant: &str, metric: &str| {
        records.get(
            "uncontended",
            variant,
            crate::scenarios::raw::RAW_MUTEX_LIBRARY,
            metric,
        )
    };
    for variant in ["tasks=64", "tasks=256"] {
        add(
            format!("Mutex uncontended {variant} / rslock, alternating rounds"),
            m(variant, "ratio_to_rslock"),
            Bound::AtLeast(1.15),
            mbare(variant, "ratio_to_rslock"),
        );
        add(
            format!("Mutex uncontended {variant} / the layout's bare calls, alternating rounds"),
            m(variant, "ratio_to_bare_calls"),
            Bound::AtLeast(0.95),
            None,
        );
    }
    add(
        "Mutex uncontended sequential p50 / rslock p50".to_owned(),
        m("sequential", "p50_ratio_to_rslock"),
        Bound::AtMost(0.95),
        mbare("sequential", "p50_ratio_to_rslock"),
    );
    for (hold, bound) in [("hold=0ms", 1.2), ("hold=1ms", 1.1)] {
        add(
            format!("Mutex contended {hold} / rslock, alternating rounds"),
            records.get("contended", hold, rslock, "mutex_ratio_interleaved"),
            Bound::AtLeast(bound),
            records.get("contended", hold, handoff, "ratio_to_rslock"),
        );
        add(
            format!("Mutex contended {hold} commands per acquisition"),
            records.get("contended", hold, mutex, "commands_per_acquisition"),
            Bound::AtMost(1.5),
            None,
        );
    }
    for (variant, what) in [
        ("uncontended tasks=16", "uncontended"),
        ("contended hold=0ms", "contended"),
    ] {
        add(
            format!("RedLock over Mutex {what} / rslock, alternating rounds"),
            records.get("redlock", variant, mutex, "ratio_to_rslock"),
            Bound::AtLeast(1.2),
            None,
        );
    }
    for variant in ["tasks=64", "tasks=256"] {
        add(
            format!("Mutex Redis time per uncontended pair ({variant}) / rslock's"),
            m(variant, "command_us_ratio_to_rslock"),
            Bound::AtMost(1.05),
            mbare(variant, "command_us_ratio_to_rslock"),
        );
    }
    // Fairness across processes (once `tests/fairness.rs`, a timing claim that a debug build
    // on two busy cores could not keep): no process of the four gets under a quarter of its
    // fair share of a contended lock, for every kind that takes turns between clients.
    for kind in crate::scenarios::processes::KINDS {
        for hold in crate::scenarios::HOLDS {
            let variant = crate::scenarios::processes::variant(hold);
            add(
                format!("{kind} across processes {variant}: fewest acquisitions / fair share"),
                records.get(
                    "contended",
                    &variant,
                    crate::scenarios::processes::library(kind),
                    "process_share_min",
                ),
                Bound::AtLeast(0.25),
                None,
            );
        }
    }
    // Two tasks per process (#52): a process's tasks hand the lock to each other, and the
    // other processes must still get their turns, each at least half its fair share, none
    // waiting more than a second. #56: a RedLock with one of its three servers down serves
    // every process (each at least half its fair share) and no acquire strays far (the
    // longest within 3 × the median).
    let two_tasks = crate::scenarios::processes::two_task_variant();
    let outage = crate::scenarios::processes::outage_variant();
    let shares: [(&[&str], &String, &str, &str, f64); 2] = [
        (
            &crate::scenarios::processes::TWO_TASK_KINDS,
            &two_tasks,
            "max_wait_ms",
            "longest acquire (ms)",
            1000.0,
        ),
        (
            &["redlock", "redlock-mutex"],
            &outage,
            "max_to_p50_wait",
            "longest acquire / median acquire",
            3.0,
        ),
    ];
    for (kinds, variant, wait_metric, wait_label, wait_bound) in shares {
        for kind in kinds {
            let lib = crate::scenarios::processes::library(kind);
            add(
                format!("{kind} across processes {variant}: fewest acquisitions / fair share"),
                records.get("contended", variant, lib, "process_share_min"),
                Bound::AtLeast(0.5),
                None,
            );
            add(
                format!("{kind} across processes {variant}: {wait_label}"),
                records.get("contended", variant, lib, wait_metric),
                Bound::AtMost(wait_bound),
                None,
            );
        }
    }
    // #56: a waiter behind another Redlock client is told of its release: in within 10 ms at
    // the 99th percentile, and no try while the peer holds.
    for peer in ["rslock", "redis-py", "node-redlock"] {
        add(
            format!("mutex waiter after a {peer} release: p99 hand-off (us)"),
            records.get("foreign", peer, "ferrisson", "handoff_p99_us"),
            Bound::AtMost(10_000.0),
            None,
        );
        add(
            format!("mutex waiter behind a {peer} hold: tries while it holds, per hand-off"),
            records.get("foreign", peer, "ferrisson", "tries_while_held"),
            Bound::AtMost(0.0),
            None,
        );
    }
    // #54: the faster multi-lock over 100 values against a `MultiLock` over 100 locks, the
    // median of the rounds' ratios.
    let fml = |metric: &str| {
        records.get(
            "faster-multilock",
            "values=100 faster-multilock / multilock",
            "ferrisson",
            metric,
        )
    };
    add(
        "faster multi-lock (100 values) pairs/s / MultiLock over 100 locks, alternating rounds"
            .to_owned(),
        fml("pairs_per_s_ratio"),
        Bound::AtLeast(20.0),
        None,
    );
    let mut at_most = |what: String, value: Option<f64>, bound: f64| {
        add(what, value, Bound::AtMost(bound), None);
    };
    at_most(
        "faster multi-lock (100 values) server CPU per value / MultiLock's".to_owned(),
        fml("server_cpu_per_value_ratio"),
        0.5,
    );
    for hold in ["hold=0ms", "hold=1ms"] {
        at_most(
            format!("contended {hold} commands per acquisition"),
            records.get("contended", hold, "ferrisson", "commands_per_acquisition"),
            2.0,
        );
    }
    let fairness = |hold: &str| {
        let max = records.get("contended", hold, "ferrisson", "fairness_max")?;
        let min = records.get("contended", hold, "ferrisson", "fairness_min")?;
        Some(max / min.max(1.0))
    };
    for hold in ["hold=0ms", "hold=1ms"] {
        at_most(
            format!("contended {hold} most / fewest acquisitions per task"),
            fairness(hold),
            4.0,
        );
    }
    for kind in ["ferrisson-semaphore", "ferrisson-expirable-semaphore"] {
        at_most(
            format!("{kind} commands per acquisition"),
            records.get("semaphore", semaphore, kind, "commands_per_acquisition"),
            3.0,
        );
    }
    let fair = crate::scenarios::lock_kinds::FAIR;
    at_most(
        "fair lock waiters served out of queue order".to_owned(),
        records.get("contended", "fifo-32-waiters", fair, "out_of_order"),
        0.0,
    );
    let w = "waiters=10000";
    at_most(
        "waiters subscriber connections".to_owned(),
        records.get("waiters", w, "ferrisson", "subscriber_connections"),
        1.0,
    );
    at_most(
        "waiters idle commands/s".to_owned(),
        records.get("waiters", w, "ferrisson", "idle_commands_per_sec"),
        0.0,
    );
    at_most(
        "waiters bytes per waiter".to_owned(),
        records.get("waiters", w, "ferrisson", "bytes_per_waiter"),
        2048.0,
    );
    // The full run only: 100,000 waiters on one client, through one subscriber connection.
    at_most(
        "100,000 waiters on one client: subscriber connections".to_owned(),
        records.get(
            "waiters",
            "waiters=100000",
            "ferrisson",
            "subscriber_connections",
        ),
        1.0,
    );
    // #57: each kind's server CPU per pair against its base (Redisson's own scripts, replayed
    // in the same run or as recorded; rslock's pair for the fenced mutex). Its ceiling is the
    // lowest floor replayed beside it: the base with what the guarantees need at least.
    {
        use crate::scenarios::server_cost::{FLOOR, KINDS, SCENARIO, TASKS};
        for kind in &KINDS {
            let variant = format!("{},tasks={TASKS}", kind.name);
            let metric = format!("cpu_ratio_to_{}", kind.base);
            let measured = records.get(SCENARIO, &variant, "ferrisson", &metric);
            let recorded = || {
                records.get(
                    SCENARIO,
                    &variant,
                    "ferrisson",
                    &format!("{metric}_recorded"),
                )
            };
            let floor = records
                .0
                .iter()
                .filter(|r| {
                    r.scenario == SCENARIO
                        && r.variant == variant
                        && r.metric == metric
                        && r.library.starts_with(FLOOR)
                })
                .map(|r| r.value)
                .reduce(f64::min);
            let what = match (measured.is_some(), kind.base) {
                (true, base) => {
                    format!("{} server CPU per pair / {base}'s, alternating", kind.name)
                }
                (false, base) => {
                    format!("{} server CPU per pair / {base}'s as recorded", kind.name)
                }
            };
            out.push(Target {
                what,
                value: match measured.or_else(recorded) {
                    Some(v) => v,
                    None => continue,
                },
                bound: Bound::AtMost(kind.budget),
                reach: floor,
            });
        }
    }
    out
}

fn fmt_value(v: f64) -> String {
    if v.abs() >= 100.0 || v == v.trunc() {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// The results as a text table, grouped by scenario, then the targets.
pub fn table(records: &Records) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| scenario | variant | library | metric | value | unit |"
    );
    let _ = writeln!(out, "|---|---|---|---|---:|---|");
    for r in &records.0 {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} |",
            r.scenario,
            r.variant,
            r.library,
            r.metric,
            fmt_value(r.value),
            r.unit
        );
    }
    let targets = targets(records);
    if !targets.is_empty() {
        let _ = writeln!(out, "\n| target | measured | bound | met | ceiling |");
        let _ = writeln!(out, "|---|---:|---|---|---:|");
        for t in targets {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} |",
                t.what,
                fmt_value(t.value),
                t.bound,
                if t.met() {
                    "yes"
                } else if t.past_ceiling() {
                    "NO, past the ceiling"
                } else {
                    "NO"
                },
                t.reach.map(fmt_value).unwrap_or_default()
            );
        }
    }
    out
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// One horizontal bar chart per panel: (title, bars of (label, value)).
fn panels(records: &Records) -> Vec<(String, Vec<(String, f64)>)> {
    let pick = |scenario: &str, variant: &str, metric: &str| -> Vec<(String, f64)> {
        records
            .0
            .iter()
            .filter(|r: &&Record| {
                r.scenario == scenario && r.variant == variant && r.metric == metric
            })
            .map(|r| (r.library.clone(), r.value))
            .collect()
    };
    let mut panels = Vec::new();
    for variant in ["sequential", "tasks=256"] {
        let mut bars = pick("uncontended", variant, "ops_per_sec");
        for bar in &mut bars {
            if bar.0 == "redis-rs" {
                bar.0 = "raw script calls (ceiling)".to_owned();
            }
        }
        panels.push((format!("uncontended lock+unlock, {variant} (ops/s)"), bars));
    }
    for variant in ["hold=0ms", "hold=1ms"] {
        panels.push((
            format!("contended, 4 clients x 16 tasks, {variant} (acquisitions/s)"),
            pick("contended", variant, "acquisitions_per_sec"),
        ));
    }
    panels.retain(|(_, bars)| !bars.is_empty());
    panels
}

/// A self-contained SVG bar chart of the headline figures.
pub fn svg(records: &Records) -> String {
    let panels = panels(records);
    let width = 900.0;
    let label_w = 260.0;
    let bar_h = 22.0;
    let gap = 6.0;
    let mut y = 20.0;
    let mut body = String::new();
    for (title, bars) in &panels {
        let _ = writeln!(
            body,
            r#"<text x="10" y="{:.0}" font-size="15" font-weight="bold">{}</text>"#,
            y + 14.0,
            escape(title)
        );
        y += 26.0;
        let max = bars.iter().map(|b| b.1).fold(0.0_f64, f64::max).max(1e-9);
        for (label, value) in bars {
            let w = (width - label_w - 120.0) * value / max;
            let color = if label.starts_with("ferrisson") {
                "#d9480f"
            } else if label.contains("ceiling") {
                "#868e96"
            } else {
                "#1971c2"
            };
            let _ = writeln!(
                body,
                r#"<text x="{:.0}" y="{:.0}" font-size="13" text-anchor="end">{}</text><rect x="{label_w:.0}" y="{:.0}" width="{w:.1}" height="{bar_h:.0}" fill="{color}"/><text x="{:.1}" y="{:.0}" font-size="13">{}</text>"#,
                label_w - 8.0,
                y + 16.0,
                escape(label),
                y,
                label_w + w + 6.0,
                y + 16.0,
                fmt_value(*value)
            );
            y += bar_h + gap;
        }
        y += 18.0;
    }
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{:.0}\" font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n{body}</svg>\n",
        y + 10.0
    )
}
