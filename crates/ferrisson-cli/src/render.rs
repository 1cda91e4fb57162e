//! How an object's state is shown: for people (`show`, `watch`) and as JSON (`--json`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ferrisson::{ObjectInfo, Party};
use serde_json::{Value, json};

/// A duration for people: `27.3s`, `4m12s`, `3h05m`.
fn human(d: Duration) -> String {
    let s = d.as_secs();
    if s < 60 {
        format!("{:.1}s", d.as_secs_f64())
    } else if s < 3600 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{}h{:02}m", s / 3600, s / 60 % 60)
    }
}

fn lease(d: Option<Duration>) -> String {
    d.map_or_else(|| "no expiry".to_owned(), |d| format!("{} left", human(d)))
}

fn ms(d: Option<Duration>) -> Value {
    d.map_or(Value::Null, |d| {
        json!(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    })
}

fn epoch_ms(at: SystemTime) -> u64 {
    u64::try_from(
        at.duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis(),
    )
    .unwrap_or(0)
}

/// Who, in one line with the details an operator acts on.
fn who(party: &Party, now: SystemTime) -> String {
    match party {
        Party::Ferrisson(r) => {
            let mut line = party.describe();
            line.push_str(&format!(", ferrisson {}, client {}", r.version, r.id));
            if let Some(started) = r.started_at {
                let up = now.duration_since(started).unwrap_or_default();
                line.push_str(&format!(", up {}", human(up)));
            }
            line
        }
        other => other.describe(),
    }
}

fn party_json(party: &Party) -> Value {
    match party {
        Party::Ferrisson(r) => json!({
            "kind": "ferrisson",
            "client_id": r.id,
            "app": r.app,
            "host": r.host,
            "pid": r.pid,
            "version": r.version,
            "started_at_ms": r.started_at.map(epoch_ms),
            "record_expires_in_ms": ms(r.expires_in),
        }),
        Party::Unrecorded { client_id } => json!({
            "kind": "unrecorded",
            "client_id": client_id,
            "description": party.describe(),
        }),
        _ => json!({ "kind": "unknown" }),
    }
}

/// `ferrisson show`: a block of aligned lines.
pub(crate) fn show(info: &ObjectInfo) -> String {
    let mut out = Vec::new();
    let Some(kind) = info.kind else {
        return format!("{}: nothing stored under this name", info.name);
    };
    let certain = if info.kind_certain {
        ""
    } else {
        " (as the layout suggests: pass --kind to say)"
    };
    out.push(format!("{}  {kind}{certain}", info.name));
    if info.key != info.name {
        out.push(format!("  key        {}", info.key));
    }
    out.push(format!(
        "  ttl        {}",
        lease(info.ttl).replace(" left", "")
    ));
    let now = info.read_at;
    if kind.is_lock() {
        if info.holders.is_empty() {
            out.push("  holder     none (free)".to_owned());
        }
        for h in &info.holders {
            out.push(format!(
                "  holder     {}  {} x{}  lease {}",
                h.owner,
                h.mode.as_str(),
                h.count,
                lease(h.lease_left)
            ));
            out.push(format!("             {}", who(&h.party, now)));
        }
        if info.queue_length > 0 {
            out.push(format!("  queue      {} waiting", info.queue_length));
        }
        for w in &info.waiters {
            let mut line = format!("  waiter {:>2} {}", w.place + 1, w.owner);
            if let Some(t) = w.timeout_in {
                line.push_str(&format!("  timeout in {}", human(t)));
            }
            if let Some(a) = w.alive_for {
                line.push_str(&format!("  alive for {}", human(a)));
            }
            out.push(line);
            out.push(format!("             {}", who(&w.party, now)));
        }
        if let Some(t) = info.fencing_token {
            out.push(format!("  token      {t}"));
        }
    }
    if let Some(p) = &info.permits {
        out.push(format!("  available  {}", p.available));
        match p.taken {
            Some(taken) => out.push(format!("  taken      {taken}")),
            None => out.push(
                "  taken      not recorded by the semaphore's layout (Redisson's)".to_owned(),
            ),
        }
        for permit in &p.permits {
            out.push(format!(
                "  permit     {}  lease {}",
                permit.id,
                lease(permit.lease_left)
            ));
            out.push(format!("             {}", who(&permit.party, now)));
        }
        if let Some((id, left)) = &p.reserved_for {
            out.push(format!("  reserved   for {id}, {}", lease(Some(*left))));
        }
    }
    if let Some(l) = &info.latch {
        out.push(format!("  count      {}", l.count));
        out.push(format!(
            "  counted    {} participant(s)",
            l.participant_count
        ));
        for p in &l.participants {
            out.push(format!("             {p}"));
        }
    }
    if let Some(r) = &info.rate {
        out.push(format!(
            "  rate       {} per {}{}",
            r.rate,
            human(r.interval),
            if r.per_client { " per client" } else { "" }
        ));
        if let Some(k) = r.keep_alive {
            out.push(format!("  keep-alive {}", human(k)));
        }
        out.push(format!(
            "  window     {} given, {} left{}",
            r.given_in_window,
            r.available
                .map_or_else(|| r.rate.to_string(), |a| a.to_string()),
            r.next_return_in
                .map(|d| format!(", next back in {}", human(d)))
                .unwrap_or_default()
        ));
        if r.per_client {
            out.push("             (the overall window; each client's own is not shown)".into());
        }
    }
    for (label, value) in &info.details {
        out.push(format!("  {label:<10} {value}"));
    }
    if let Some(s) = info.subscribers {
        out.push(format!("  waiting    {s} client connection(s) subscribed"));
    }
    out.join("\n")
}

/// What `watch` prints a new line for: everything but leases and clocks.
pub(crate) fn watch_state(info: &ObjectInfo) -> String {
    let Some(kind) = info.kind else {
        return "nothing stored".to_owned();
    };
    let mut parts = vec![kind.to_string()];
    if kind.is_lock() {
        if info.holders.is_empty() {
            parts.push("free".into());
        }
        for h in &info.holders {
            parts.push(format!(
                "{} x{} by {}",
                h.mode.as_str(),
                h.count,
                h.party.describe()
            ));
        }
        let waiting = info.queue_length.max(info.waiters.len() as u64);
        if waiting > 0 {
            parts.push(format!("{waiting} queued"));
        }
    }
    if let Some(p) = &info.permits {
        parts.push(format!("{} available", p.available));
        if let Some(t) = p.taken {
            parts.push(format!("{t} taken"));
        }
    }
    if let Some(l) = &info.latch {
        parts.push(format!("count {}", l.count));
    }
    if let Some(r) = &info.rate {
        parts.push(format!("{} given", r.given_in_window));
    }
    for (label, value) in &info.details {
        parts.push(format!("{label} {value}"));
    }
    if let Some(s) = info.subscribers {
        parts.push(format!("{s} subscribed"));
    }
    parts.join(", ")
}

/// `--json`: every field of the state.
pub(crate) fn json(info: &ObjectInfo) -> Value {
    json!({
        "name": info.name,
        "key": info.key,
        "kind": info.kind.map(|k| k.as_str()),
        "kind_certain": info.kind_certain,
        "ttl_ms": ms(info.ttl),
        "read_at_ms": epoch_ms(info.read_at),
        "holders": info.holders.iter().map(|h| json!({
            "owner": h.owner,
            "mode": h.mode.as_str(),
            "count": h.count,
            "lease_left_ms": ms(h.lease_left),
            "client": party_json(&h.party),
        })).collect::<Vec<_>>(),
        "waiters": info.waiters.iter().map(|w| json!({
            "owner": w.owner,
            "place": w.place,
            "timeout_in_ms": ms(w.timeout_in),
            "alive_for_ms": ms(w.alive_for),
            "client": party_json(&w.party),
        })).collect::<Vec<_>>(),
        "queue_length": info.queue_length,
        "subscribers": info.subscribers,
        "fencing_token": info.fencing_token,
        "permits": info.permits.as_ref().map(|p| json!({
            "available": p.available,
            "taken": p.taken,
            "permits": p.permits.iter().map(|t| json!({
                "id": t.id,
                "lease_left_ms": ms(t.lease_left),
                "client": party_json(&t.party),
            })).collect::<Vec<_>>(),
            "reserved_for": p.reserved_for.as_ref().map(|(id, left)| json!({
                "id": id, "lease_left_ms": ms(Some(*left)),
            })),
        })),
        "latch": info.latch.as_ref().map(|l| json!({
            "count": l.count,
            "participant_count": l.participant_count,
            "participants": l.participants,
        })),
        "rate": info.rate.as_ref().map(|r| json!({
            "rate": r.rate,
            "interval_ms": ms(Some(r.interval)),
            "per_client": r.per_client,
            "keep_alive_ms": ms(r.keep_alive),
            "available": r.available,
            "given_in_window": r.given_in_window,
            "next_return_in_ms": ms(r.next_return_in),
        })),
        "details": info.details.iter().map(|(label, value)| json!({
            "label": label, "value": value,
        })).collect::<Vec<_>>(),
        "summary": info.summary(),
    })
}

/// `doctor`'s report for people: a line per finding (area, verdict, server, what was found),
/// the fix under it, then the overall verdict.
pub fn report(report: &ferrisson::DeploymentReport) -> String {
    let mut out = String::new();
    for f in &report.findings {
        let node = f
            .node
            .as_deref()
            .map(|n| format!("{n}: "))
            .unwrap_or_default();
        out.push_str(&format!(
            "{:<12} {:<9} {node}{}\n",
            f.area.as_str(),
            f.verdict.as_str(),
            f.detail
        ));
        if let Some(fix) = &f.fix {
            out.push_str(&format!("{:<22} fix: {fix}\n", ""));
        }
    }
    let worst = report.worst();
    out.push_str(&format!(
        "\n{} (docs/guarantees.md)",
        match worst {
            ferrisson::doctor::Verdict::Kept => "every guarantee holds".to_owned(),
            ferrisson::doctor::Verdict::Weakened =>
                "every guarantee holds, some with the windows above".to_owned(),
            ferrisson::doctor::Verdict::Unchecked =>
                "some guarantees could not be checked".to_owned(),
            ferrisson::doctor::Verdict::Broken => "a guarantee is broken".to_owned(),
        }
    ));
    out
}

/// `doctor --json`: the worst verdict, the exit code and every finding.
pub fn report_json(report: &ferrisson::DeploymentReport) -> Value {
    let findings: Vec<Value> = report
        .findings
        .iter()
        .map(|f| {
            json!({
                "area": f.area.as_str(),
                "guarantee": f.area.guarantee(),
                "node": f.node,
                "verdict": f.verdict.as_str().to_ascii_lowercase(),
                "detail": f.detail,
                "fix": f.fix,
            })
        })
        .collect();
    json!({
        "verdict": report.worst().as_str().to_ascii_lowercase(),
        "exit_code": report.exit_code(),
        "findings": findings,
    })
}

/// `waits`: every waiting task, what it holds and waits for and who blocks it, then the
/// cycles.
pub fn waits(graph: &ferrisson::WaitGraph) -> String {
    let now = SystemTime::now();
    let mut out = String::new();
    if graph.tasks.is_empty() {
        return "no task waits on record".to_owned();
    }
    for (i, task) in graph.tasks.iter().enumerate() {
        let mark = if task.deadlocked { " DEADLOCKED" } else { "" };
        out.push_str(&format!(
            "#{i} {} task {}{mark}\n",
            who(&task.party, now),
            task.task
        ));
        for h in &task.holds {
            let what = match &h.owner {
                Some(owner) => format!("as {owner}"),
                None => format!("{} permit(s)", h.permits),
            };
            out.push_str(&format!(
                "   holds {} `{}` {what}\n",
                h.kind.replace('_', " "),
                h.key
            ));
        }
        for w in &task.waits {
            let waited = now.duration_since(w.since).unwrap_or_default();
            let mut line = format!(
                "   waits {} for {} `{}`",
                human(waited),
                w.kind.replace('_', " "),
                w.key
            );
            if let Some(n) = w.permits {
                line.push_str(&format!(" ({n} permit(s))"));
            }
            if !w.holders.is_empty() {
                line.push_str(&format!(", held by {}", w.holders.join(", ")));
            }
            if !w.queued_ahead.is_empty() {
                line.push_str(&format!(", {} queued ahead", w.queued_ahead.len()));
            }
            if !w.blocked_by.is_empty() {
                let by: Vec<String> = w.blocked_by.iter().map(|b| format!("#{b}")).collect();
                line.push_str(&format!(", behind {}", by.join(", ")));
            }
            out.push_str(&line);
            out.push('\n');
        }
    }
    if graph.cycles.is_empty() {
        out.push_str("\nno cycle");
    } else {
        for cycle in &graph.cycles {
            out.push_str(&format!("\nDEADLOCK: {}", graph.describe(cycle)));
        }
    }
    out
}

/// `waits --json`: the tasks and the cycles.
pub fn waits_json(graph: &ferrisson::WaitGraph) -> Value {
    let tasks: Vec<Value> = graph
        .tasks
        .iter()
        .map(|t| {
            let holds: Vec<Value> = t
                .holds
                .iter()
                .map(|h| json!({"kind": h.kind, "key": h.key, "owner": h.owner, "permits": h.permits}))
                .collect();
            let waits: Vec<Value> = t
                .waits
                .iter()
                .map(|w| {
                    json!({
                        "id": w.id,
                        "kind": w.kind,
                        "key": w.key,
                        "owner": w.owner,
                        "permits": w.permits,
                        "since_ms": epoch_ms(w.since),
                        "holders": w.holders,
                        "queued_ahead": w.queued_ahead,
                        "blocked_by": w.blocked_by,
                    })
                })
                .collect();
            json!({
                "id": t.id,
                "client": party_json(&t.party),
                "task": t.task,
                "deadlocked": t.deadlocked,
                "detects": t.detects,
                "holds": holds,
                "waits": waits,
            })
        })
        .collect();
    let cycles: Vec<Value> = graph
        .cycles
        .iter()
        .map(|c| {
            json!({
                "tasks": c.tasks,
                "victim": c.victim,
                "victim_wait": c.victim_wait,
                "description": graph.describe(c),
            })
        })
        .collect();
    json!({"tasks": tasks, "cycles": cycles})
}
