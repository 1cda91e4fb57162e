//! `ferrisson waits`: the wait-for graph across processes, for people and as JSON, and its
//! exit code (1 when there is a cycle). The waiting clients are the test's own, without
//! deadlock detection, so that their cycle stands while the tool looks.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferrisson::{AcquireOptions, Client, ClientConfig, Lock, ReentrantLock};
use ferrisson_testkit::{RedisServer, unique_name};
use serde_json::Value;

fn ferrisson(url: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ferrisson"))
        .args(args)
        .env("REDIS_URL", url)
        .env_remove("REDIS_PASSWORD")
        .env_remove("REDISCLI_AUTH")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// Polls `check` every 100 ms until it gives something, for 20 s at most; panics with `what`
/// then.
fn poll_until<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now()
        .checked_add(Duration::from_secs(20))
        .expect("a test's patience fits the clock");
    loop {
        if let Some(found) = check() {
            return found;
        }
        assert!(Instant::now() < deadline, "not within 20 s: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn waits_shows_the_graph_and_flags_a_cycle() {
    let server = RedisServer::spawn();
    let url = server.url();
    let out = ferrisson(&url, &["waits"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("no task waits on record"));

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let name = unique_name("cliwaits");
    let (tasks, clients) = runtime.block_on(async {
        let ready = Arc::new(tokio::sync::Barrier::new(2));
        let (mut tasks, mut clients) = (Vec::new(), Vec::new());
        for (me, (hold, wait)) in [("a", "b"), ("b", "a")].into_iter().enumerate() {
            let config = ClientConfig::new(&url).with_app_name(format!("cli-waiter-{me}"));
            let client = Client::with_config(config).await.unwrap();
            let (hold, wait) = (
                ReentrantLock::new(&client, &format!("{name}:{hold}")).unwrap(),
                ReentrantLock::new(&client, &format!("{name}:{wait}")).unwrap(),
            );
            let ready = ready.clone();
            tasks.push(tokio::spawn(async move {
                let held = hold.lock().await.unwrap();
                ready.wait().await;
                let options = AcquireOptions::new().with_wait(Duration::from_secs(60));
                let _ = wait.acquire(options).await;
                drop(held);
            }));
            clients.push(client);
        }
        (tasks, clients)
    });

    let graph: Value = poll_until("a cycle shown", || {
        let out = ferrisson(&url, &["waits", "--json"]);
        let graph: Value = serde_json::from_slice(&out.stdout).unwrap();
        let cycle = graph["cycles"].as_array().is_some_and(|c| !c.is_empty());
        cycle.then(|| {
            assert_eq!(out.status.code(), Some(1), "a cycle: exit 1");
            graph
        })
    });
    let tasks_json = graph["tasks"].as_array().unwrap();
    assert_eq!(tasks_json.len(), 2, "{graph}");
    for task in tasks_json {
        assert_eq!(task["deadlocked"], true);
        assert_eq!(task["holds"].as_array().unwrap().len(), 1, "{task}");
        assert_eq!(task["waits"][0]["blocked_by"].as_array().unwrap().len(), 1);
        assert!(
            task["client"]["app"]
                .as_str()
                .unwrap()
                .starts_with("cli-waiter-")
        );
    }
    let out = ferrisson(&url, &["waits"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.contains("DEADLOCK: "), "{text}");
    for me in 0..2 {
        assert!(text.contains(&format!("cli-waiter-{me} on ")), "{text}");
    }
    assert!(text.contains("(pid "), "{text}");
    assert!(
        text.contains("waits ") && text.contains("held by"),
        "{text}"
    );

    // Cancelled, the waits leave the records, and the graph is empty again.
    for task in tasks {
        task.abort();
    }
    poll_until("the waits off the records", || {
        (ferrisson(&url, &["waits"]).status.code() == Some(0)).then_some(())
    });
    runtime.block_on(async {
        for client in clients {
            client.shutdown().await.unwrap();
        }
    });
}
