//! Runs the harness in `--smoke` mode (every scenario once, in its shortest phases) against a server it spawns and checks its output is
//! well formed. No timing is asserted: numbers from a debug build on a shared machine mean
//! nothing; that they are produced, named and finite does.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::collections::BTreeSet;
use std::process::Command;

#[test]
fn a_quick_run_writes_well_formed_json_and_a_chart() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("results.json");
    let svg = dir.path().join("chart.svg");
    let output = Command::new(env!("CARGO_BIN_EXE_ferrisson-bench"))
        .arg("--smoke")
        .arg("--no-external-peers")
        .arg("--json")
        .arg(&json)
        .arg("--svg")
        .arg(&svg)
        .env_remove("REDIS_URL")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the harness failed:\n{stdout}\n{stderr}"
    );

    let records: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(!records.is_empty());
    let mut scenarios = BTreeSet::new();
    let mut libraries = BTreeSet::new();
    for record in &records {
        let object = record.as_object().unwrap();
        let keys: BTreeSet<&str> = object.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            BTreeSet::from(["library", "metric", "scenario", "unit", "value", "variant"]),
            "{record}"
        );
        for key in ["scenario", "variant", "library", "metric", "unit"] {
            assert!(!object[key].as_str().unwrap().is_empty(), "{record}");
        }
        assert!(object["value"].as_f64().unwrap().is_finite(), "{record}");
        scenarios.insert(object["scenario"].as_str().unwrap().to_owned());
        libraries.insert(object["library"].as_str().unwrap().to_owned());
    }
    for scenario in [
        "raw",
        "server-cost",
        "uncontended",
        "contended",
        "waiters",
        "semaphore",
        "latch",
        "cluster",
        "redlock",
        "rate-limiter",
    ] {
        assert!(scenarios.contains(scenario), "no {scenario} records");
    }
    for library in [
        "redis-rs",
        "ferrisson",
        "rslock",
        "ferrisson-fair-lock",
        "ferrisson-spin-lock",
        "ferrisson-mutex",
        "ferrisson-rwlock",
        "ferrisson-semaphore",
        "ferrisson-expirable-semaphore",
    ] {
        assert!(libraries.contains(library), "no {library} records");
    }
    let find = |scenario: &str, metric: &str| {
        records.iter().any(|r| {
            r["scenario"] == scenario && r["library"] == "ferrisson" && r["metric"] == metric
        })
    };
    for (scenario, metric) in [
        ("uncontended", "ratio_to_raw"),
        ("uncontended", "ratio_to_rslock"),
        ("uncontended", "ratio_to_server_ceiling"),
        ("uncontended", "server_cpu_us_per_op"),
        ("contended", "commands_per_acquisition"),
        ("contended", "server_cpu_us_per_acquisition"),
        ("contended", "subscriber_connections"),
        ("waiters", "bytes_per_waiter"),
        ("waiters", "idle_commands_per_sec"),
        ("waiters", "handoff_us"),
        ("latch", "wake_p99_us"),
        ("server-cost", "server_cpu_per_pair_in_ping_pairs"),
        ("server-cost", "commands_per_pair"),
        ("contended", "process_share_min"),
        ("contended", "ratio_to_in_process"),
    ] {
        assert!(
            find(scenario, metric),
            "no {scenario}/{metric} for ferrisson"
        );
    }
    // Every kind run across processes reports each process's share (the bench's fairness
    // target; the share itself is a timing figure, not checked here).
    for library in [
        "ferrisson",
        "ferrisson-spin-lock",
        "ferrisson-write-lock",
        "ferrisson-mutex",
        "ferrisson-redlock",
        "ferrisson-redlock-mutex",
    ] {
        for hold in ["hold=0ms", "hold=1ms"] {
            let variant = format!("{hold},processes=4");
            assert!(
                records.iter().any(|r| r["scenario"] == "contended"
                    && r["variant"] == variant.as_str()
                    && r["library"] == library
                    && r["metric"] == "process_share_min"),
                "no contended/{variant}/{library} process_share_min"
            );
        }
    }
    // And with two tasks per process (#52), with their longest waits.
    for library in ["ferrisson", "ferrisson-mutex", "ferrisson-fair-lock"] {
        for metric in ["process_share_min", "max_wait_ms"] {
            assert!(
                records.iter().any(|r| r["scenario"] == "contended"
                    && r["variant"] == "hold=0ms,processes=4,tasks=2"
                    && r["library"] == library
                    && r["metric"] == metric),
                "no contended/hold=0ms,processes=4,tasks=2/{library} {metric}"
            );
        }
    }
    for metric in [
        "ratio_to_standalone",
        "commands_per_acquisition",
        "subscriber_connections",
    ] {
        assert!(
            records
                .iter()
                .any(|r| r["scenario"] == "cluster" && r["metric"] == metric),
            "no cluster/{metric}"
        );
    }
    // The server's CPU per pair in each shape: ferrisson's calls, their batch form, rslock's.
    for (variant, library) in [
        ("server-ceiling", "redis-rs pipelined"),
        ("server-ceiling batched", "redis-rs pipelined"),
        ("server-ceiling", "rslock commands pipelined"),
    ] {
        assert!(
            records.iter().any(|r| r["scenario"] == "raw"
                && r["variant"] == variant
                && r["library"] == library
                && r["metric"] == "server_cpu_us_per_op"
                && r["value"].as_f64().is_some_and(|v| v > 0.0)),
            "no raw/{variant}/{library} server CPU"
        );
    }
    assert!(stdout.contains("node and python peers skipped"), "{stdout}");

    let chart = std::fs::read_to_string(&svg).unwrap();
    assert!(chart.starts_with("<svg") && chart.trim_end().ends_with("</svg>"));
    assert!(chart.contains("ferrisson"));
}
