//! Coalescing: script calls made at the same time go to Redis as one call of the script's batch
//! form, and each keeps the outcome it would have had alone. The engine's own test: it calls
//! scripts through the engine, as the synchronizer crates do.
#![allow(clippy::unwrap_used, clippy::panic)]

use ferrisson_core::__engine::{ClientEngine, Script, ScriptCall};
use ferrisson_core::{Client, ClientConfig, Error};
use ferrisson_testkit::{
    RedisCluster, RedisServer, calls_between as delta, command_calls, unique_name,
};

/// A client of `url` that coalesces its calls (off by default).
async fn coalescing(url: &str) -> Client {
    Client::with_config(ClientConfig::new(url).with_coalesce_calls(true))
        .await
        .unwrap_or_else(|e| panic!("connecting to {url}: {e}"))
}

/// The probe's source, with a last line of its own.
macro_rules! probe_source {
    ($last:literal) => {
        concat!(
            r#"-- operation: test/probe
-- protocol: 1
if ARGV[1] == 'nil' then
  return nil
elseif ARGV[1] == 'error' then
  return redis.error_reply('ERR asked for an error')
elseif ARGV[1] == 'lua' then
  local missing
  return missing + 1
end
return redis.call('incr', KEYS[1])
"#,
            $last
        )
    };
}

/// A probe whose argument picks its outcome: a count, nil, an error reply, a Lua runtime error,
/// or (`incr` on a hash) a wrong-type error raised by `redis.call`.
static PROBE: Script = Script::new("test/probe", probe_source!(""));

/// Reads a key: a script of another shape than [`PROBE`].
static READER: Script = Script::new("test/reader", READER_SOURCE);

const READER_SOURCE: &str = r#"-- operation: test/reader
-- protocol: 1
return redis.call('get', KEYS[1])
"#;

/// What a probe call came to, in a form two runs can be compared by.
fn outcome(result: Result<Option<i64>, Error>) -> String {
    match result {
        Ok(value) => format!("ok {value:?}"),
        Err(Error::WrongType { key }) => format!("wrong type {key}"),
        Err(Error::Redis(e)) if e.to_string().contains("asked for an error") => {
            "error reply".into()
        }
        Err(Error::Redis(e)) if e.to_string().contains("arithmetic") => "lua error".into(),
        Err(e) => format!("other {e}"),
    }
}

/// Forty probe calls started together (on a current-thread runtime every one of them is queued
/// before the client's dispatcher runs): their outcomes in order, and how many script
/// commands the server counted for them.
async fn forty_probes(client: &Client, server: &RedisServer, prefix: &str) -> (Vec<String>, u64) {
    let mut con = server.connection();
    let hash = format!("{prefix}:hash");
    let _: () = redis::cmd("HSET")
        .arg(&hash)
        .arg("f")
        .arg("v")
        .query(&mut con)
        .unwrap();
    let calls: Vec<ScriptCall> = (0..40)
        .map(|i| {
            let (key, what) = match i % 5 {
                0 => (format!("{prefix}:count:{i}"), "incr"),
                1 => (format!("{prefix}:nil:{i}"), "nil"),
                2 => (format!("{prefix}:error:{i}"), "error"),
                3 => (hash.clone(), "incr"),
                _ => (format!("{prefix}:lua:{i}"), "lua"),
            };
            ScriptCall::new(&PROBE, &[&key]).arg(what)
        })
        .collect();
    let before = command_calls(&mut con);
    let results = futures::future::join_all(
        calls
            .iter()
            .map(|call| client.eval_once::<Option<i64>>(call)),
    )
    .await;
    let after = command_calls(&mut con);
    let script_commands = delta(&before, &after, "evalsha") + delta(&before, &after, "eval");
    for i in (0..40).step_by(5) {
        let count: i64 = redis::cmd("GET")
            .arg(format!("{prefix}:count:{i}"))
            .query(&mut con)
            .unwrap();
        assert_eq!(count, 1, "call {i} ran exactly once");
    }
    (results.into_iter().map(outcome).collect(), script_commands)
}

#[tokio::test(flavor = "current_thread")]
async fn calls_made_together_run_as_one_batch_with_the_outcomes_they_have_alone() {
    let server = RedisServer::spawn();
    let prefix = unique_name("coalesce");
    let alone_client =
        Client::with_config(ClientConfig::new(server.url()).with_coalesce_calls(false))
            .await
            .unwrap();
    let (alone, alone_commands) =
        forty_probes(&alone_client, &server, &format!("{prefix}:alone")).await;
    let batched_client = coalescing(&server.url()).await;
    let (batched, batched_commands) =
        forty_probes(&batched_client, &server, &format!("{prefix}:batched")).await;

    let hash = |run: &str| format!("wrong type {prefix}:{run}:hash");
    for (i, (a, b)) in alone.iter().zip(&batched).enumerate() {
        let expected = match i % 5 {
            0 => "ok Some(1)".to_owned(),
            1 => "ok None".to_owned(),
            2 => "error reply".to_owned(),
            3 => hash("alone"),
            _ => "lua error".to_owned(),
        };
        assert_eq!(a, &expected, "call {i} alone");
        assert_eq!(
            b,
            &expected.replace(":alone:", ":batched:"),
            "call {i} in a batch"
        );
    }
    assert!(
        alone_commands >= 40,
        "without coalescing every call is its own EVALSHA: {alone_commands}"
    );
    // One batch: its EVALSHA (answered NOSCRIPT the first time, then EVAL of the batch form).
    assert!(
        (1..=2).contains(&batched_commands),
        "forty calls made together take one batch: {batched_commands} script commands"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_batch_after_a_script_flush_sends_its_source() {
    let server = RedisServer::spawn();
    let client = coalescing(&server.url()).await;
    let prefix = unique_name("coalesce-flush");
    let (first, _) = forty_probes(&client, &server, &format!("{prefix}:1")).await;
    server.flush_scripts();
    let (second, commands) = forty_probes(&client, &server, &format!("{prefix}:2")).await;
    assert_eq!(
        first
            .iter()
            .map(|o| o.replace(":1:", ":"))
            .collect::<Vec<_>>(),
        second
            .iter()
            .map(|o| o.replace(":2:", ":"))
            .collect::<Vec<_>>()
    );
    assert!((1..=2).contains(&commands), "{commands} script commands");
}

#[tokio::test(flavor = "current_thread")]
async fn on_a_cluster_calls_are_batched_per_slot() {
    let cluster = RedisCluster::spawn();
    let client = Client::with_config(
        ClientConfig::cluster(cluster.urls())
            .without_replica_sync()
            .with_coalesce_calls(true),
    )
    .await
    .unwrap();
    let prefix = unique_name("coalesce-cluster");
    // Names spread over the slots, and names that share one slot through a hash tag.
    let keys: Vec<String> = (0..30)
        .map(|i| {
            if i % 2 == 0 {
                format!("{prefix}:{i}")
            } else {
                format!("{{{prefix}}}:{i}")
            }
        })
        .collect();
    let calls: Vec<ScriptCall> = keys
        .iter()
        .map(|key| ScriptCall::new(&PROBE, &[key]).arg("incr"))
        .collect();
    let results = futures::future::join_all(
        calls
            .iter()
            .map(|call| client.eval_once::<Option<i64>>(call)),
    )
    .await;
    for (key, result) in keys.iter().zip(results) {
        assert_eq!(outcome(result), "ok Some(1)", "{key}");
    }
    for key in &keys {
        let count: Option<i64> = client.query(redis::cmd("GET").arg(key)).await.unwrap();
        assert_eq!(count, Some(1), "{key} counted once");
    }
}

#[tokio::test(flavor = "current_thread")]
async fn calls_queued_together_run_in_the_order_they_were_made() {
    let server = RedisServer::spawn();
    let client = coalescing(&server.url()).await;
    let key = unique_name("coalesce-order");
    // Counted, read, counted, read: a batch per script would read 2 twice.
    let incr = ScriptCall::new(&PROBE, &[&key]).arg("incr");
    let read = ScriptCall::new(&READER, &[&key]);
    let (a, b, c, d, e) = futures::join!(
        client.eval_once::<Option<i64>>(&incr),
        client.eval_once::<Option<i64>>(&read),
        client.eval_once::<Option<i64>>(&incr),
        client.eval_once::<Option<i64>>(&incr),
        client.eval_once::<Option<i64>>(&read),
    );
    let got: Vec<Option<i64>> = [a, b, c, d, e].into_iter().map(|r| r.unwrap()).collect();
    assert_eq!(got, [Some(1), Some(1), Some(2), Some(3), Some(3)]);
}

/// A call whose caller has gone by the time `NOSCRIPT` comes back is not resent with its
/// source: it has not run, and the caller's clean-up, sent meanwhile, may have run already,
/// which the resent call would then follow (a permit taken after its undo, a lock held by
/// nobody for a lease).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_caller_left_is_not_resent_after_noscript() {
    // A probe the process has sent, which the server lost without the client seeing it
    // (`NOSCRIPT`). (A script the process never sent goes out behind its `SCRIPT LOAD` in the
    // same write: it runs like any call sent, whenever its caller leaves.)
    for coalesce in [true, false] {
        caller_left_before_noscript(coalesce, &PROBE).await;
    }
}

async fn caller_left_before_noscript(coalesce: bool, probe: &'static Script) {
    let server = RedisServer::spawn();
    let proxy = ferrisson_testkit::FaultProxy::start(server.port());
    let client = Client::with_config(ClientConfig::new(proxy.url()).with_coalesce_calls(coalesce))
        .await
        .unwrap();
    let key = unique_name("coalesce-left");
    let read = || {
        let call = ScriptCall::new(&READER, &[&key]);
        let client = client.clone();
        async move { client.eval::<Option<i64>>(&call).await.unwrap() }
    };
    let other = format!("{key}-other");
    let call = ScriptCall::new(probe, &[&other]).arg("incr");
    client.eval::<i64>(&call).await.unwrap();
    assert_eq!(read().await, None);
    // The server knows the reader only (the probe is flushed behind the client's back: it
    // goes out without a load), and every reply takes a while.
    server.flush_scripts();
    let mut con = server.connection();
    let _: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(READER_SOURCE)
        .query(&mut con)
        .unwrap();
    let before = command_calls(&mut con);
    proxy.delay_replies(std::time::Duration::from_millis(400));
    // The probe's EVALSHA reaches Redis at once; its caller leaves before the NOSCRIPT reply
    // is back.
    let probe = ScriptCall::new(probe, &[&key]).arg("incr");
    let left = tokio::time::timeout(
        std::time::Duration::from_millis(200),
        client.eval::<i64>(&probe),
    )
    .await;
    assert!(left.is_err(), "the probe's reply came back early: {left:?}");
    // Two calls behind it: once the second is answered, a resent probe would have arrived.
    assert_eq!(read().await, None, "coalesce {coalesce}: the probe ran");
    assert_eq!(read().await, None, "coalesce {coalesce}: the probe ran");
    proxy.delay_replies(std::time::Duration::ZERO);
    let after = command_calls(&mut con);
    assert_eq!(
        delta(&before, &after, "eval"),
        0,
        "coalesce {coalesce}: the probe was resent"
    );
}
