//! `Client::check_deployment` (and `ferrisson doctor`) against real servers in the
//! configurations that decide a guarantee: an evicting policy, no persistence, AOF with
//! `everysec`, a replica with and without `min-replicas-to-write`, a cluster with a slot no
//! primary serves, an ACL user lacking one right, a script time limit a long script could
//! pass (TLS: `tests/tls.rs`).
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::acl::{NAMESPACE, PASSWORD, documented_acl};
use crate::common;

use std::time::Duration;

use common::*;
use ferrisson::doctor::{Area, Verdict};
use ferrisson::{Client, ClientConfig, DeploymentReport, ReplicaSync};
use ferrisson_testkit::RedisCluster;

/// The one verdict `report` gives `area` (per server: the worst of them).
fn verdict(report: &DeploymentReport, area: Area) -> Verdict {
    report
        .of(area)
        .map(|f| f.verdict)
        .max()
        .unwrap_or_else(|| panic!("no finding for {area}: {report:#?}"))
}

/// `CONFIG SET name value` on the server `con` reaches.
fn config_set(con: &mut redis::Connection, name: &str, value: &str) {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg(name)
        .arg(value)
        .query(con)
        .unwrap();
}

fn spawn_with(args: &[&str]) -> RedisServer {
    RedisServer::try_spawn_with(args).unwrap_or_else(|e| panic!("{e}"))
}

async fn report_of(url: &str) -> DeploymentReport {
    Client::connect(url)
        .await
        .unwrap()
        .check_deployment()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evicting_policy_breaks_the_guarantees_and_noeviction_keeps_them() {
    let server = spawn_with(&["--maxmemory", "64mb", "--maxmemory-policy", "volatile-lru"]);
    let report = report_of(&server.url()).await;
    assert_eq!(verdict(&report, Area::Eviction), Verdict::Broken);
    let finding = report.of(Area::Eviction).next().unwrap();
    assert!(finding.detail.contains("volatile-lru"), "{finding:?}");
    assert!(finding.fix.as_deref().unwrap().contains("noeviction"));
    assert_eq!(report.exit_code(), 1);

    let mut admin = server.connection();
    config_set(&mut admin, "maxmemory-policy", "noeviction");
    let report = report_of(&server.url()).await;
    assert_eq!(verdict(&report, Area::Eviction), Verdict::Kept);
    assert_eq!(verdict(&report, Area::Server), Verdict::Kept);

    // A script time limit a long purge or inspection could pass: Redis would answer BUSY.
    config_set(&mut admin, "busy-reply-threshold", "20");
    let report = report_of(&server.url()).await;
    assert_eq!(verdict(&report, Area::Server), Verdict::Weakened);
    assert!(
        report
            .of(Area::Server)
            .any(|f| f.detail.contains("busy-reply-threshold 20 ms")),
        "{report:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_persistence_is_broken_and_aof_everysec_is_a_window() {
    // The test servers keep nothing.
    let server = RedisServer::spawn();
    let report = report_of(&server.url()).await;
    assert_eq!(verdict(&report, Area::Persistence), Verdict::Broken);
    assert!(
        report
            .of(Area::Persistence)
            .next()
            .unwrap()
            .detail
            .contains("no persistence")
    );
    assert_eq!(report.exit_code(), 1);

    let server = spawn_with(&["--appendonly", "yes", "--appendfsync", "everysec"]);
    let report = report_of(&server.url()).await;
    assert_eq!(verdict(&report, Area::Persistence), Verdict::Weakened);
    assert_eq!(
        report.exit_code(),
        0,
        "a window is no broken guarantee: {report:#?}"
    );

    let server = spawn_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let report = report_of(&server.url()).await;
    assert_eq!(verdict(&report, Area::Persistence), Verdict::Kept);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_without_replica_sync_is_what_a_failover_can_lose() {
    let primary = RedisServer::spawn();
    let port = primary.port().to_string();
    let _replica = spawn_with(&["--replicaof", "127.0.0.1", &port]);
    let mut admin = primary.connection();
    eventually(Duration::from_secs(10), "the replica connected", || {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query(&mut primary.connection())
            .unwrap();
        async move { info.contains("connected_slaves:1") }
    })
    .await;
    // A standalone client waits for no replica unless told.
    let report = report_of(&primary.url()).await;
    assert_eq!(verdict(&report, Area::Replication), Verdict::Broken);
    assert!(
        report
            .of(Area::Replication)
            .next()
            .unwrap()
            .fix
            .as_deref()
            .unwrap()
            .contains("with_replica_sync")
    );

    config_set(&mut admin, "min-replicas-to-write", "1");
    let report = report_of(&primary.url()).await;
    assert_eq!(verdict(&report, Area::Replication), Verdict::Weakened);

    let synced = Client::with_config(
        ClientConfig::new(primary.url()).with_replica_sync(ReplicaSync::default()),
    )
    .await
    .unwrap();
    let report = synced.check_deployment().await.unwrap();
    assert_eq!(verdict(&report, Area::Replication), Verdict::Kept);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_no_primary_serves_breaks_the_cluster() {
    let cluster = RedisCluster::spawn();
    let client = Client::with_config(ClientConfig::cluster(cluster.urls()))
        .await
        .unwrap();
    let report = client.check_deployment().await.unwrap();
    assert_eq!(verdict(&report, Area::Cluster), Verdict::Kept);
    // Every primary is checked on its own.
    assert_eq!(report.of(Area::Eviction).count(), 3, "{report:#?}");

    // Every node forgets slot 0.
    for node in cluster.nodes() {
        let _: redis::RedisResult<()> = redis::cmd("CLUSTER")
            .arg("DELSLOTS")
            .arg(0)
            .query(&mut node.connection());
    }
    let report = client.check_deployment().await.unwrap();
    assert_eq!(
        verdict(&report, Area::Cluster),
        Verdict::Broken,
        "{report:#?}"
    );
    assert_eq!(report.exit_code(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rights_of_a_service_account_are_checked_one_by_one() {
    let server = RedisServer::spawn();
    let mut admin = server.connection();
    let mut setuser = redis::cmd("ACL");
    setuser.arg("SETUSER");
    for arg in documented_acl() {
        setuser.arg(arg);
    }
    let _: () = setuser.query(&mut admin).unwrap();
    // An operator's client, in the service's namespace, checks the service's account.
    let operator = Client::with_config(ClientConfig::new(server.url()).with_namespace(NAMESPACE))
        .await
        .unwrap();
    let report = operator.check_deployment_for("ferrisson").await.unwrap();
    assert_eq!(
        verdict(&report, Area::Permissions),
        Verdict::Kept,
        "the documented rights are all the library needs: {report:#?}"
    );

    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("ferrisson")
        .arg("-pttl")
        .query(&mut admin)
        .unwrap();
    let report = operator.check_deployment_for("ferrisson").await.unwrap();
    assert_eq!(verdict(&report, Area::Permissions), Verdict::Broken);
    let finding = report.of(Area::Permissions).next().unwrap();
    assert!(finding.detail.contains("PTTL"), "{finding:?}");
    assert_eq!(report.exit_code(), 1);

    // The account itself may not run `ACL DRYRUN`: its own check says so, and breaks nothing
    // it cannot see.
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("ferrisson")
        .arg("+pttl")
        .query(&mut admin)
        .unwrap();
    let url = format!("redis://ferrisson:{PASSWORD}@127.0.0.1:{}", server.port());
    let service = Client::with_config(ClientConfig::new(url).with_namespace(NAMESPACE))
        .await
        .unwrap();
    let report = service.check_deployment().await.unwrap();
    assert_eq!(verdict(&report, Area::Permissions), Verdict::Unchecked);
}
