//! Replica sync (Redisson's `checkLockSyncedSlaves`) against a real primary and replica: every
//! acquire, renewal and release waits for the replica (`WAIT`); a replica frozen past the sync
//! timeout makes acquires roll back with `NotReplicated`, renewals end in a loss, releases
//! still succeed; a primary without replicas is not waited on.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common;

use std::time::Duration;

use common::*;
use ferrisson::{Client, ClientConfig, Error, Lock, LossReason, ReentrantLock, ReplicaSync};
use ferrisson_semaphore::Semaphore;

struct Pair {
    primary: RedisServer,
    replica: RedisServer,
}

fn pair() -> Pair {
    let primary = RedisServer::spawn();
    let replica =
        RedisServer::try_spawn_with(&["--replicaof", "127.0.0.1", &primary.port().to_string()])
            .unwrap();
    let deadline = std::time::Instant::now()
        .checked_add(Duration::from_secs(20))
        .expect("the sync deadline is within the clock's range");
    loop {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query(&mut primary.connection())
            .unwrap();
        if info.contains("connected_slaves:1") && info.contains("state=online") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the replica never synced: {info}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    Pair { primary, replica }
}

async fn synced_client(url: &str, lease: Duration, sync: ReplicaSync) -> Client {
    Client::with_config(
        ClientConfig::new(url)
            .with_lease(lease)
            .with_response_timeout(Duration::from_secs(2))
            .with_replica_sync(sync),
    )
    .await
    .unwrap()
}

fn waits(con: &mut redis::Connection) -> u64 {
    command_calls(con).get("wait").copied().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquires_wait_for_the_replica_and_roll_back_when_it_does_not_answer() {
    let pair = pair();
    let sync = ReplicaSync::default().with_timeout(Duration::from_millis(300));
    let client = synced_client(&pair.primary.url(), Duration::from_secs(30), sync).await;
    let mut primary = pair.primary.connection();
    let mut replica = pair.replica.connection();
    let name = unique_name("synced-lock");
    let lock = ReentrantLock::new(&client, &name).unwrap();

    let before = waits(&mut primary);
    let guard = lock.lock().await.unwrap();
    assert!(
        waits(&mut primary) > before,
        "the acquire waited for the replica"
    );
    let on_replica: i64 = redis::cmd("EXISTS").arg(&name).query(&mut replica).unwrap();
    assert_eq!(
        on_replica, 1,
        "the replica has the hold when the acquire returns"
    );
    guard.unlock().await.unwrap();
    let semaphore = Semaphore::new(&client, &unique_name("synced-semaphore"))
        .unwrap()
        .with_limit(3)
        .unwrap();
    assert!(semaphore.try_set_permits(3).await.unwrap());

    // A replica that does not answer: acquires are rolled back and end in NotReplicated,
    // after the configured retries.
    pair.replica.pause();
    let err = lock.try_lock().await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::NotReplicated {
                acked: 0,
                wanted: 1
            }
        ),
        "{err}"
    );
    assert!(!lock.is_locked().await.unwrap(), "the hold was rolled back");
    let no_retry = synced_client(
        &pair.primary.url(),
        Duration::from_secs(30),
        ReplicaSync::default()
            .with_timeout(Duration::from_millis(300))
            .with_retry_acquire(false),
    )
    .await;
    // Without retries: one acquire and its WAIT, and a rollback that waits for no replica.
    let before = waits(&mut primary);
    let err = ReentrantLock::new(&no_retry, &name)
        .unwrap()
        .try_lock()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotReplicated { .. }), "{err}");
    assert_eq!(waits(&mut primary) - before, 1, "the rollback sent no WAIT");
    assert!(!lock.is_locked().await.unwrap());
    let semaphore_no_retry = Semaphore::new(&no_retry, semaphore.key()).unwrap();
    let err = semaphore_no_retry.try_acquire().await.unwrap_err();
    assert!(matches!(err, Error::NotReplicated { .. }), "{err}");
    assert_eq!(
        semaphore.available_permits().await.unwrap(),
        3,
        "the permit was given back"
    );
    pair.replica.resume();

    // With the replica back, everything works, releases included.
    let guard = lock.lock().await.unwrap();
    let permit = semaphore.acquire().await.unwrap();
    assert_eq!(semaphore.available_permits().await.unwrap(), 2);
    // A release whose sync fails still releases (and says so in the log).
    pair.replica.pause();
    guard.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
    pair.replica.resume();
    permit.release().await.unwrap();
    assert_eq!(semaphore.available_permits().await.unwrap(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_of_one_client_take_turns_with_replica_sync() {
    let pair = pair();
    let client = synced_client(
        &pair.primary.url(),
        Duration::from_secs(30),
        ReplicaSync::default(),
    )
    .await;
    let name = unique_name("synced-contended");
    let inside = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let lock = ReentrantLock::new(&client, &name).unwrap();
        let inside = inside.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..5 {
                let guard = lock.lock().await.unwrap();
                assert_eq!(inside.fetch_add(1, std::sync::atomic::Ordering::SeqCst), 0);
                tokio::task::yield_now().await;
                inside.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                guard.unlock().await.unwrap();
            }
        }));
    }
    join_within(Duration::from_secs(30), "every task gets its turns", tasks).await;
    // (Local hand-offs are off with replica sync: each acquisition is a synced call.)
    let mut replica = pair.replica.connection();
    let exists: i64 = redis::cmd("EXISTS").arg(&name).query(&mut replica).unwrap();
    assert_eq!(exists, 0, "the replica saw the last release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_the_replica_does_not_acknowledge_end_in_a_loss() {
    let pair = pair();
    let client = synced_client(
        &pair.primary.url(),
        Duration::from_millis(1_500),
        ReplicaSync::default().with_timeout(Duration::from_millis(200)),
    )
    .await;
    let lock = ReentrantLock::new(&client, &unique_name("synced-renewal")).unwrap();
    let guard = lock.lock().await.unwrap();
    pair.replica.pause();
    let reason = tokio::time::timeout(Duration::from_secs(10), guard.lost())
        .await
        .unwrap_or_else(|_| panic!("no loss signal while the replica kept silent"));
    assert_eq!(reason, LossReason::NotReplicated);
    pair.replica.resume();
    // The primary kept the lock: the loss is about what a failover would do.
    assert!(matches!(
        guard.unlock().await,
        Err(Error::LeaseLost(LossReason::NotReplicated))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_without_replicas_is_not_waited_on_and_sync_is_off_by_default() {
    let server = RedisServer::spawn();
    let mut con = server.connection();
    let synced = synced_client(
        &server.url(),
        Duration::from_secs(30),
        ReplicaSync::default(),
    )
    .await;
    let plain = client(&server.url()).await;
    assert!(plain.config().replica_sync().is_none());
    let before = waits(&mut con);
    for client in [&synced, &plain] {
        let lock = ReentrantLock::new(client, &unique_name("no-replicas")).unwrap();
        let started = tokio::time::Instant::now();
        lock.lock().await.unwrap().unlock().await.unwrap();
        assert!(started.elapsed() < Duration::from_millis(900));
    }
    assert_eq!(waits(&mut con), before, "no WAIT without replicas");
    // A sync timeout the response timeout cannot cover is refused.
    let bad = Client::with_config(
        ClientConfig::new(server.url())
            .with_response_timeout(Duration::from_secs(1))
            .with_replica_sync(ReplicaSync::default().with_timeout(Duration::from_secs(2))),
    )
    .await;
    assert!(matches!(bad, Err(Error::InvalidArgument(_))));
    // WAITAOF asked of a server without it (Redis before 7.2) is refused at connect; Auto
    // picks WAIT there (the WAIT counts above).
    let version: String = redis::cmd("INFO").arg("server").query(&mut con).unwrap();
    let has_waitaof =
        !version.contains("redis_version:7.0") && !version.contains("redis_version:6");
    let aof = Client::with_config(
        ClientConfig::new(server.url())
            .with_replica_sync(ReplicaSync::default().with_mode(ferrisson::SyncMode::WaitAof)),
    )
    .await;
    match aof {
        Ok(_) => assert!(has_waitaof),
        Err(e) => assert!(
            !has_waitaof && matches!(e, Error::InvalidArgument(_)),
            "{e}"
        ),
    }
}
