//! The printed table, the JSON file and the SVG chart.

use std::fmt::Write as _;

use crate::record::{Record, Records};

/// The targets of `docs/benchmarks.md`, checked against a run. Each entry: what, the figure,
/// the bound, whether it holds.
pub fn targets(records: &Records) -> Vec<(String, f64, String, bool)> {
    let mut out = Vec::new();
    if let Some(r) = records.get("uncontended", "tasks=256", "ferrisson", "ratio_to_raw") {
        out.push((
            "uncontended tasks=256 / raw pipelined".to_owned(),
            r,
            ">= 0.8".to_owned(),
            r >= 0.8,
        ));
    }
    if let Some(r) = records.get("uncontended", "sequential", "ferrisson", "p50_ratio_to_raw") {
        out.push((
            "uncontended sequential p50 / raw pair p50".to_owned(),
            r,
            "<= 1.2".to_owned(),
            r <= 1.2,
        ));
    }
    for hold in ["hold=0ms", "hold=1ms"] {
        if let Some(c) = records.get("contended", hold, "ferrisson", "commands_per_acquisition") {
            out.push((
                format!("contended {hold} commands per acquisition"),
                c,
                "<= 4".to_owned(),
                c <= 4.0,
            ));
        }
        if let Some(ours) = records.get("contended", hold, "ferrisson", "acquisitions_per_sec") {
            let best_peer = records
                .0
                .iter()
                .filter(|r| {
                    r.scenario == "contended"
                        && r.variant == hold
                        && r.metric == "acquisitions_per_sec"
                        && !r.library.starts_with("ferrisson")
                })
                .map(|r| r.value)
                .fold(None, |best: Option<f64>, v| {
                    Some(best.map_or(v, |b| b.max(v)))
                });
            if let Some(best) = best_peer {
                out.push((
                    format!("contended {hold} acquisitions/s vs best peer"),
                    ours / best,
                    "> 1".to_owned(),
                    ours > best,
                ));
            }
            // The steadier comparison with the in-process peer: alternating rounds.
            if let Some(r) = records.get(
                "contended",
                hold,
                crate::scenarios::rslock_peer::LIBRARY,
                "ferrisson_ratio_interleaved",
            ) {
                out.push((
                    format!("contended {hold} acquisitions/s vs rslock, alternating rounds"),
                    r,
                    "> 1".to_owned(),
                    r > 1.0,
                ));
            }
        }
    }
    let fair = crate::scenarios::lock_kinds::FAIR;
    if let Some(n) = records.get("contended", "fifo-32-waiters", fair, "out_of_order") {
        out.push((
            "fair lock waiters served out of queue order".to_owned(),
            n,
            "= 0".to_owned(),
            n == 0.0,
        ));
    }
    let w = "waiters=10000";
    if let Some(s) = records.get("waiters", w, "ferrisson", "subscriber_connections") {
        out.push((
            "waiters subscriber connections".to_owned(),
            s,
            "= 1".to_owned(),
            s == 1.0,
        ));
    }
    if let Some(i) = records.get("waiters", w, "ferrisson", "idle_commands_per_sec") {
        out.push((
            "waiters idle commands/s".to_owned(),
            i,
            "= 0".to_owned(),
            i == 0.0,
        ));
    }
    if let Some(b) = records.get("waiters", w, "ferrisson", "bytes_per_waiter") {
        out.push((
            "waiters bytes per waiter".to_owned(),
            b,
            "<= 4096".to_owned(),
            b <= 4096.0,
        ));
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
        let _ = writeln!(out, "\n| target | measured | bound | met |");
        let _ = writeln!(out, "|---|---:|---|---|");
        for (what, value, bound, met) in targets {
            let _ = writeln!(
                out,
                "| {what} | {} | {bound} | {} |",
                fmt_value(value),
                if met { "yes" } else { "NO" }
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
