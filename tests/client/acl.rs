//! Least privilege: every synchronizer runs as an ACL user holding only the rights
//! `docs/deployment.md` lists (the test reads the `ACL SETUSER` line from there, so the two
//! cannot drift apart).
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common;

use std::time::Duration;

use common::every_kind::{EveryKind, KindNames};
use common::*;
use ferrisson::{Client, ClientConfig, FencedLock, Lock, ReentrantLock, SyncObject};
use ferrisson_latch::CountDownLatch;
use ferrisson_multilock::{AnyLock, MultiLock};
use ferrisson_rate_limiter::{RateLimiter, RateType};
use ferrisson_rwlock::ReadWriteLock;
use ferrisson_semaphore::Semaphore;
use ferrisson_spin_lock::SpinLock;

pub(crate) const PASSWORD: &str = "acl-test-secret";
pub(crate) const NAMESPACE: &str = "acl-ns:";

/// The documented `ACL SETUSER` arguments, with the placeholders filled in.
pub(crate) fn documented_acl() -> Vec<String> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/deployment.md"))
        .unwrap();
    let block = common::marked_section(&doc, "acl");
    let line = block
        .lines()
        .find(|l| l.starts_with("ACL SETUSER"))
        .expect("the block has an ACL SETUSER line");
    line.split_whitespace()
        .skip(2)
        .map(|arg| {
            arg.replace("<password>", PASSWORD)
                .replace("<namespace>", NAMESPACE)
        })
        .collect()
}

async fn restricted_client(server: &RedisServer) -> Client {
    client_with_rights(server, documented_acl()).await
}

async fn client_with_rights(server: &RedisServer, rights: Vec<String>) -> Client {
    let mut admin = server.connection();
    let mut setuser = redis::cmd("ACL");
    setuser.arg("SETUSER");
    for arg in rights {
        setuser.arg(arg);
    }
    let _: () = setuser.query(&mut admin).unwrap();
    let url = format!("redis://ferrisson:{PASSWORD}@127.0.0.1:{}", server.port());
    Client::with_config(ClientConfig::new(url).with_namespace(NAMESPACE))
        .await
        .unwrap_or_else(|e| panic!("the documented rights let a client connect: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_synchronizer_works_with_only_the_documented_rights() {
    let server = RedisServer::spawn();
    let holder = restricted_client(&server).await;
    let waiting = restricted_client(&server).await;

    // Holds of the lock (fenced), fair lock, write lock, both semaphores and a latch, and a
    // waiter behind each, woken through pub/sub when they are released.
    let names = KindNames::unique("acl");
    let held = EveryKind::hold(&holder, &names).await;
    let waiters = held.waiters(&waiting, &names);
    eventually(
        Duration::from_secs(10),
        "the waiters subscribed",
        || async { waiting.waiter_stats().1 >= KindNames::KINDS },
    )
    .await;
    assert!(
        ReentrantLock::new(&waiting, &names.lock)
            .unwrap()
            .is_locked()
            .await
            .unwrap()
    );
    held.release().await;
    for waiter in waiters {
        tokio::time::timeout(Duration::from_secs(20), waiter)
            .await
            .expect("each waiter got what it waited for")
            .unwrap();
    }

    // The kinds EveryKind leaves out.
    let spin = SpinLock::new(&holder, &unique_name("acl-spin")).unwrap();
    spin.lock().await.unwrap().unlock().await.unwrap();
    let rw = ReadWriteLock::new(&holder, &unique_name("acl-rw")).unwrap();
    let read = rw.read_lock().lock().await.unwrap();
    assert!(rw.read_lock().is_locked().await.unwrap());
    read.unlock().await.unwrap();
    let semaphore = Semaphore::new(&holder, &unique_name("acl-semaphore")).unwrap();
    assert!(semaphore.try_set_permits(2).await.unwrap());
    assert_eq!(semaphore.available_permits().await.unwrap(), 2);
    let latch = CountDownLatch::new(&holder, &unique_name("acl-latch")).unwrap();
    assert!(latch.try_set_count(1).await.unwrap());
    latch.count_down().await.unwrap();
    assert_eq!(latch.count().await.unwrap(), 0);
    let limiter = RateLimiter::new(&holder, &unique_name("acl-rate")).unwrap();
    assert!(
        limiter
            .try_set_rate(RateType::Overall, 5, Duration::from_secs(1))
            .await
            .unwrap()
    );
    limiter.acquire(2).await.unwrap();
    assert!(limiter.rate().await.unwrap().is_some());
    // The object calls every synchronizer shares (expiry, delete), on several shapes of key.
    assert!(limiter.expire(Duration::from_secs(60)).await.unwrap());
    assert!(limiter.clear_expire().await.unwrap());
    assert!(limiter.delete().await.unwrap());
    assert!(semaphore.expire(Duration::from_secs(60)).await.unwrap());
    assert!(semaphore.delete().await.unwrap());
    let fenced = FencedLock::new(&holder, &unique_name("acl-object")).unwrap();
    let guard = fenced.lock().await.unwrap();
    assert!(fenced.expire(Duration::from_secs(60)).await.unwrap());
    assert!(fenced.delete().await.unwrap());
    drop(guard);
    let both = MultiLock::new(vec![
        Box::new(ReentrantLock::new(&holder, &unique_name("acl-multi-a")).unwrap())
            as Box<dyn AnyLock>,
        Box::new(ReentrantLock::new(&waiting, &unique_name("acl-multi-b")).unwrap()),
    ])
    .unwrap();
    both.lock().await.unwrap().unlock().await.unwrap();
    // A fair-lock waiter that gives up leaves the queue, moving those behind it up.
    let fair_name = unique_name("acl-fair-leave");
    let fair_held = ferrisson_fair_lock::FairLock::new(&holder, &fair_name)
        .unwrap()
        .lock()
        .await
        .unwrap();
    let fair = ferrisson_fair_lock::FairLock::new(&waiting, &fair_name).unwrap();
    let behind = tokio::spawn({
        let fair = fair.clone();
        async move {
            fair.try_lock_with(ferrisson::AcquireOptions::new().with_wait(Duration::from_secs(20)))
                .await
        }
    });
    wait_queue_length(&fair, 1).await;
    let gave_up = fair
        .try_lock_with(ferrisson::AcquireOptions::new().with_wait(Duration::from_millis(300)))
        .await
        .unwrap();
    assert!(gave_up.is_none(), "held: its wait ran out and it left");
    assert_eq!(fair.queue_length().await.unwrap(), 1);
    fair_held.unlock().await.unwrap();
    behind
        .await
        .unwrap()
        .unwrap()
        .expect("the first waiter gets it")
        .unlock()
        .await
        .unwrap();

    // No call was refused along the way (a refusal the client absorbs, such as a `SCRIPT LOAD`
    // it falls back from, would show here), and the scripts were loaded, not sent with `EVAL`.
    let mut admin = server.connection();
    let errors: String = redis::cmd("INFO")
        .arg("errorstats")
        .query(&mut admin)
        .unwrap();
    assert!(!errors.contains("errorstat_NOPERM"), "{errors}");
    assert!(!errors.contains("errorstat_NOSCRIPT"), "{errors}");

    // The rights are really that narrow: no key outside the namespace, no admin command.
    let mut restricted = redis::Client::open(format!(
        "redis://ferrisson:{PASSWORD}@127.0.0.1:{}",
        server.port()
    ))
    .unwrap()
    .get_connection()
    .unwrap();
    let outside: redis::RedisResult<Option<String>> = redis::cmd("GET")
        .arg("someone-else:key")
        .query(&mut restricted);
    assert_eq!(outside.unwrap_err().code(), Some("NOPERM"));
    let flush: redis::RedisResult<()> = redis::cmd("FLUSHALL").query(&mut restricted);
    assert_eq!(flush.unwrap_err().code(), Some("NOPERM"));
}

/// Without the right to `SCRIPT LOAD`, the client asks once, then sends a script the server
/// lacks with `EVAL` (every call would otherwise pay a refused load).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_script_load_the_client_asks_once_and_falls_back_on_eval() {
    let server = RedisServer::spawn();
    let rights = documented_acl()
        .into_iter()
        .filter(|r| r != "+script|load")
        .collect();
    let client = client_with_rights(&server, rights).await;
    let mut admin = server.connection();
    let mut refused_after_first = 0;
    for round in 0..3 {
        let lock = ReentrantLock::new(&client, &unique_name(&format!("no-load-{round}"))).unwrap();
        lock.lock().await.unwrap().unlock().await.unwrap();
        let semaphore = Semaphore::new(&client, &unique_name(&format!("no-load-{round}"))).unwrap();
        semaphore.try_set_permits(1).await.unwrap();
        semaphore.acquire().await.unwrap().release().await.unwrap();
        let refused = error_count(&mut admin, "NOPERM");
        if round == 0 {
            // One pipeline of loads, refused: one `NOPERM` per script the process had sent by
            // then (tests running beside this one in the process send scripts too).
            assert!(refused >= 1, "the client never asked to load");
            refused_after_first = refused;
        } else {
            assert_eq!(
                refused, refused_after_first,
                "the client asked to load again"
            );
        }
    }
    let calls: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut admin)
        .unwrap();
    assert!(calls.contains("cmdstat_eval:"), "no EVAL fallback: {calls}");
}

/// How many `code` errors the server has answered since it started.
fn error_count(con: &mut redis::Connection, code: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg("errorstats").query(con).unwrap();
    let prefix = format!("errorstat_{code}:count=");
    info.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .map_or(0, |n| n.trim().parse().unwrap())
}

/// Deadlock detection needs one right beyond the documented line, `+scan`
/// (docs/deployment.md): with it, a cycle of two tasks is found, and nothing the detection
/// sends or reads is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlock_detection_works_with_the_documented_rights_and_scan() {
    let server = RedisServer::spawn();
    let mut rights = documented_acl();
    rights.push("+scan".into());
    drop(client_with_rights(&server, rights).await);
    let url = format!("redis://ferrisson:{PASSWORD}@127.0.0.1:{}", server.port());
    let config = ClientConfig::new(url)
        .with_namespace(NAMESPACE)
        .with_deadlock_detection(Duration::from_millis(100));
    let client = Client::with_config(config).await.unwrap();
    let name = unique_name("acl-deadlock");
    let (a, b) = (format!("{name}:a"), format!("{name}:b"));
    let outcomes = crate::waits::crossed(
        (&client, &client),
        move |c| ReentrantLock::new(c, &a).unwrap(),
        move |c| ferrisson::FairLock::new(c, &b).unwrap(),
        Duration::from_secs(30),
    )
    .await;
    crate::waits::one_gave_way(&outcomes);
    let log: redis::Value = redis::cmd("ACL")
        .arg("LOG")
        .query(&mut server.connection())
        .unwrap();
    assert_eq!(
        error_count(&mut server.connection(), "NOPERM"),
        0,
        "{log:?}"
    );
}
