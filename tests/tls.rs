//! TLS against a real TLS-enabled redis-server, for whichever TLS backend the tests are built
//! with: rustls in the full test pass (redis-rs picks it when both TLS features are on), and
//! native-tls when built with every feature but rustls (`.ci/run`: `cargo nextest run -p
//! ferrisson --features full,blocking,metrics,tls-native-tls --test tls`). Server verification
//! with the test CA, a wrong CA refused with a clear error, mutual TLS. A binary of its own, so
//! that the other backend's run builds this file alone.
#![cfg(any(feature = "tls-rustls", feature = "tls-native-tls"))]
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use std::time::Duration;

use common::*;
use ferrisson::{Client, ClientConfig, Error, Lock, ReentrantLock};
use ferrisson_testkit::TestCerts;

fn certs() -> TestCerts {
    TestCerts::try_generate().unwrap_or_else(|e| panic!("{e}"))
}

fn tls_server(certs: &TestCerts, client_certificates: bool) -> RedisServer {
    RedisServer::try_spawn_tls(certs, client_certificates).unwrap_or_else(|e| panic!("{e}"))
}

/// A ferrisson client of the server's TLS port that trusts `ca` (a file of `certs`) and, with
/// `client_cert`, presents the client certificate.
async fn tls_client(
    server: &RedisServer,
    certs: &TestCerts,
    ca: &str,
    client_cert: bool,
) -> ferrisson::Result<Client> {
    let url = server.tls_url().unwrap();
    let redis_client = redis::Client::build_with_tls(
        url.as_str(),
        redis::TlsCertificates {
            client_tls: client_cert.then(|| redis::ClientTlsConfig {
                client_cert: certs.pem("client.crt"),
                client_key: certs.pem("client.key"),
            }),
            root_cert: Some(certs.pem(ca)),
        },
    )
    .unwrap();
    Client::from_redis_client(
        redis_client,
        ClientConfig::default().with_connect_timeout(Duration::from_secs(5)),
    )
    .await
}

/// A hold, a waiter woken through the subscriber connection (also over TLS), and a release.
async fn lock_hand_over(client: &Client, other: &Client) {
    let name = unique_name("tls");
    let first = ReentrantLock::new(client, &name).unwrap();
    let second = ReentrantLock::new(other, &name).unwrap();
    let guard = first.lock().await.unwrap();
    let waiter = tokio::spawn(async move {
        let guard = second.lock().await.unwrap();
        guard.unlock().await.unwrap();
    });
    eventually(Duration::from_secs(10), "the waiter subscribed", || async {
        other.waiter_stats().1 == 1
    })
    .await;
    guard.unlock().await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("the waiter was woken over TLS")
        .unwrap();
    assert!(!first.is_locked().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_verified_with_the_test_ca_carries_locks_and_wake_ups() {
    let certs = certs();
    let server = tls_server(&certs, false);
    let a = tls_client(&server, &certs, "ca.crt", false).await.unwrap();
    let b = tls_client(&server, &certs, "ca.crt", false).await.unwrap();
    lock_hand_over(&a, &b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_certificate_from_another_ca_is_refused_with_a_clear_error() {
    let certs = certs();
    let server = tls_server(&certs, false);
    let Err(err) = tls_client(&server, &certs, "other-ca.crt", false).await else {
        panic!("a server whose certificate the client's CA did not sign is refused");
    };
    assert!(matches!(err, Error::Unreachable { .. }), "{err:?}");
    assert!(
        err.to_string().to_lowercase().contains("certificate"),
        "the error says the certificate is the problem: {err}"
    );
    assert!(
        err.to_string().contains("TLS handshake failed"),
        "the error says what to check: {err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_admits_a_client_with_its_certificate_and_refuses_one_without() {
    let certs = certs();
    let server = tls_server(&certs, true);
    let a = tls_client(&server, &certs, "ca.crt", true).await.unwrap();
    let b = tls_client(&server, &certs, "ca.crt", true).await.unwrap();
    lock_hand_over(&a, &b).await;
    let refused = tls_client(&server, &certs, "ca.crt", false).await;
    assert!(
        matches!(refused, Err(Error::Unreachable { .. })),
        "a client without a certificate is refused: {:?}",
        refused.err()
    );
}

/// `Client::check_deployment` over TLS: the same checks as over a plain connection (the
/// doctor's other configurations: `tests/client/doctor.rs`), with the server's findings read
/// through the encrypted link.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deployment_is_checked_over_tls() {
    use ferrisson::doctor::{Area, Verdict};
    let certs = certs();
    let server = tls_server(&certs, false);
    let client = tls_client(&server, &certs, "ca.crt", false).await.unwrap();
    let report = client.check_deployment().await.unwrap();
    let of = |area: Area| report.of(area).map(|f| f.verdict).max();
    for area in [
        Area::Eviction,
        Area::Server,
        Area::Replication,
        Area::Permissions,
        Area::Latency,
        Area::Clock,
    ] {
        assert_eq!(of(area), Some(Verdict::Kept), "{area}: {report:#?}");
    }
    // The test servers keep nothing on disk.
    assert_eq!(of(Area::Persistence), Some(Verdict::Broken));
    assert_eq!(report.exit_code(), 1);
}
