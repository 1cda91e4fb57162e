//! The Lua script registry against the `lua/` tree and a real Redis.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common;

use ferrisson::Lock;

use std::collections::BTreeSet;
use std::path::Path;

use common::*;
use std::time::Duration;

const SOON: Duration = Duration::from_secs(10);
use ferrisson::ReentrantLock;
use ferrisson_core::__engine::{PROTOCOL_VERSION, Script};

fn registered() -> Vec<&'static Script> {
    let mut all = ferrisson_core::__engine::scripts().to_vec();
    all.extend(ferrisson_lock::scripts());
    all.extend(ferrisson_fair_lock::scripts());
    all.extend(ferrisson_rwlock::scripts());
    all.extend(ferrisson_semaphore::scripts());
    all.extend(ferrisson_expirable_semaphore::scripts());
    all.extend(ferrisson_latch::scripts());
    all.extend(ferrisson_spin_lock::scripts());
    all.extend(ferrisson_rate_limiter::scripts());
    all.extend(ferrisson_faster_multilock::scripts());
    all
}

fn lua_files(dir: &Path, prefix: &str, found: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if path.is_dir() {
            lua_files(&path, &format!("{prefix}{name}/"), found);
        } else if let Some(op) = name.strip_suffix(".lua") {
            found.insert(format!("{prefix}{op}"));
        }
    }
}

#[test]
fn every_lua_file_is_registered_with_a_matching_header() {
    let mut files = BTreeSet::new();
    lua_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("lua"),
        "",
        &mut files,
    );
    let names: BTreeSet<String> = registered().iter().map(|s| s.name().to_owned()).collect();
    assert_eq!(files, names, "lua/ and the registries differ");
    for script in registered() {
        let header = script.header().unwrap();
        assert_eq!(header.operation, script.name());
        assert_eq!(header.protocol, PROTOCOL_VERSION, "{}", script.name());
    }
}

/// `SCRIPT LOAD` of `source` (the `what` of `script`), its digest.
fn load(con: &mut redis::Connection, script: &Script, what: &str, source: &str) -> String {
    redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(source)
        .query(con)
        .unwrap_or_else(|e| panic!("{what} of {} does not load: {e}", script.name()))
}

#[test]
fn every_script_and_its_batch_form_load_on_a_real_server() {
    let redis = TestRedis::any();
    let mut con = redis.connection();
    for script in registered() {
        let sha = load(&mut con, script, "the source", script.source());
        assert_eq!(sha, script.sha1(), "{}", script.name());
        load(&mut con, script, "the batch form", script.batch_source());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_keep_working_across_a_script_flush() {
    let server = RedisServer::spawn();
    let client = client(&server.url()).await;
    let lock = ReentrantLock::new(&client, &unique_name("flush"))
        .unwrap()
        .owned_by(client.new_owner());
    let guard = lock.lock().await.unwrap();
    server.flush_scripts();
    let inner = lock.lock().await.unwrap();
    server.flush_scripts();
    inner.unlock().await.unwrap();
    server.flush_scripts();
    guard.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
}

/// How many `NOSCRIPT` errors the server has answered since it started.
fn noscript_errors(con: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("errorstats").query(con).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("errorstat_NOSCRIPT:count="))
        .map_or(0, |n| n.trim().parse().unwrap())
}

/// A lock, a fair lock and a semaphore, each acquired and released once.
async fn use_three_kinds(client: &ferrisson::Client, tag: &str) {
    let lock = ReentrantLock::new(client, &format!("{tag}-lock")).unwrap();
    lock.lock().await.unwrap().unlock().await.unwrap();
    let fair = ferrisson::FairLock::new(client, &format!("{tag}-fair")).unwrap();
    fair.lock().await.unwrap().unlock().await.unwrap();
    let semaphore = ferrisson::Semaphore::new(client, &format!("{tag}-semaphore")).unwrap();
    semaphore.try_set_permits(1).await.unwrap();
    semaphore.acquire().await.unwrap().release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_are_loaded_before_the_first_call_after_a_restart() {
    let mut server = RedisServer::spawn();
    let client = client(&server.url()).await;
    let tag = unique_name("reconnect");
    use_three_kinds(&client, &tag).await;
    let mut con = server.connection();
    assert_eq!(
        noscript_errors(&mut con),
        0,
        "a script first sent is loaded before its first call"
    );
    server.restart();
    // The first command after the restart meets the dead connection; the client reconnects.
    let probe = ReentrantLock::new(&client, &format!("{tag}-probe")).unwrap();
    eventually(SOON, "the client reaches the restarted server", || {
        let probe = probe.clone();
        async move { probe.is_locked().await.is_ok() }
    })
    .await;
    use_three_kinds(&client, &format!("{tag}-again")).await;
    let mut con = server.connection();
    assert_eq!(
        noscript_errors(&mut con),
        0,
        "every script was loaded before its first call on the new connection"
    );
    let calls = command_calls(&mut con);
    assert_eq!(
        calls.get("eval").copied().unwrap_or(0),
        0,
        "no EVAL fallback"
    );
    assert!(calls.get("script|load").copied().unwrap_or(0) >= 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_script_flush_one_noscript_reloads_every_script() {
    let server = RedisServer::spawn();
    let client = client(&server.url()).await;
    let tag = unique_name("flushed");
    use_three_kinds(&client, &tag).await;
    let mut con = server.connection();
    let before = noscript_errors(&mut con);
    server.flush_scripts();
    use_three_kinds(&client, &format!("{tag}-again")).await;
    assert_eq!(
        noscript_errors(&mut con) - before,
        1,
        "the first call meets NOSCRIPT; the scripts are loaded before the next"
    );
}
