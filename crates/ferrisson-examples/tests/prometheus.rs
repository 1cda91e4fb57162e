//! Metrics as a Prometheus server scrapes them (feature `metrics`): every ferrisson metric is
//! described (`# HELP`, `# TYPE`), and a hold's duration lands in `ferrisson_hold_seconds`
//! for each kind, whether the guard was unlocked, dropped or run scoped.
#![allow(clippy::unwrap_used, clippy::panic)]

#[path = "../../../tests/common/mod.rs"]
mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use common::*;
use ferrisson::{AcquireOptions, Lock, ReentrantLock};
use ferrisson::{ExpirableSemaphore, FairLock};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};

fn scrape(addr: SocketAddr) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_owned()
}

/// The value of the sample `name{labels}` in a scrape.
fn sample(body: &str, series: &str) -> Option<f64> {
    body.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scrape_describes_every_metric_and_times_holds_by_kind() {
    let addr = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    PrometheusBuilder::new()
        .with_http_listener(addr)
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &[0.01, 0.1, 1.0, 10.0])
        .unwrap()
        .install()
        .unwrap();
    let redis = TestRedis::any();
    // Made after the recorder: the client describes the metrics to it when it connects.
    let client = client(&redis.url()).await;
    let lock = ReentrantLock::new(&client, &unique_name("prom-lock")).unwrap();
    let guard = lock.lock().await.unwrap();
    tokio::time::sleep(Duration::from_millis(120)).await;
    guard.unlock().await.unwrap();
    lock.with(|_| async {}).await.unwrap();
    drop(lock.lock().await.unwrap());
    let fair = FairLock::new(&client, &unique_name("prom-fair")).unwrap();
    fair.lock().await.unwrap().unlock().await.unwrap();
    let sem = ExpirableSemaphore::new(&client, &unique_name("prom-exp")).unwrap();
    assert!(sem.try_set_permits(1).await.unwrap());
    let permit = sem
        .acquire_with(AcquireOptions::new().with_lease(Duration::from_secs(5)))
        .await
        .unwrap();
    permit.release().await.unwrap();
    let latch = ferrisson::CountDownLatch::new(&client, &unique_name("prom-latch")).unwrap();
    assert!(latch.try_set_count(1).await.unwrap());
    let waiting = latch.clone();
    let opened = tokio::spawn(async move { waiting.wait().await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    latch.count_down().await.unwrap();
    opened.await.unwrap().unwrap();
    let limiter = ferrisson::RateLimiter::new(&client, &unique_name("prom-rate")).unwrap();
    assert!(
        limiter
            .try_set_rate(ferrisson::RateType::Overall, 1, Duration::from_secs(60))
            .await
            .unwrap()
    );
    assert!(limiter.try_acquire(1).await.unwrap());
    let out_of_time = limiter
        .try_acquire_with(
            1,
            AcquireOptions::new().with_wait(Duration::from_millis(50)),
        )
        .await
        .unwrap();
    assert!(!out_of_time);

    // Name labels, opted into by one client: its series carry the object's key, the other
    // client's do not.
    let named = ferrisson::Client::with_config(
        ferrisson::ClientConfig::new(redis.url()).with_metric_names(true),
    )
    .await
    .unwrap();
    let labelled = unique_name("prom-named");
    ReentrantLock::new(&named, &labelled)
        .unwrap()
        .with(|_| async {})
        .await
        .unwrap();

    let body = scrape(addr);
    let series = format!("ferrisson_acquisitions_total{{kind=\"lock\",name=\"{labelled}\"}}");
    assert_eq!(sample(&body, &series), Some(1.0), "{body}");
    let held = format!("ferrisson_hold_seconds_count{{kind=\"lock\",name=\"{labelled}\"}}");
    assert_eq!(sample(&body, &held), Some(1.0), "{body}");
    assert_eq!(
        sample(&body, "ferrisson_acquisitions_total{kind=\"latch\"}"),
        Some(1.0),
        "{body}"
    );
    assert_eq!(
        sample(&body, "ferrisson_acquisitions_total{kind=\"rate_limiter\"}"),
        Some(1.0)
    );
    assert_eq!(
        sample(&body, "ferrisson_timeouts_total{kind=\"rate_limiter\"}"),
        Some(1.0)
    );
    assert_eq!(
        sample(&body, "ferrisson_wait_seconds_count{kind=\"latch\"}"),
        Some(1.0)
    );
    for (name, kind) in [
        ("ferrisson_acquire_seconds", "histogram"),
        ("ferrisson_hold_seconds", "histogram"),
        ("ferrisson_acquisitions_total", "counter"),
        ("ferrisson_renewals_total", "counter"),
    ] {
        if body.contains(&format!("{name}{{")) || body.contains(&format!("{name} ")) {
            assert!(
                body.contains(&format!("# HELP {name} ")),
                "{name} described:\n{body}"
            );
            assert!(
                body.contains(&format!("# TYPE {name} {kind}")),
                "{name}:\n{body}"
            );
        }
    }
    assert_eq!(
        sample(&body, "ferrisson_hold_seconds_count{kind=\"lock\"}"),
        Some(3.0),
        "{body}"
    );
    assert_eq!(
        sample(&body, "ferrisson_hold_seconds_count{kind=\"fair_lock\"}"),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &body,
            "ferrisson_hold_seconds_count{kind=\"expirable_semaphore\"}"
        ),
        Some(1.0)
    );
    // The 120 ms hold is above the 0.1 s bucket; the two quick ones are below it.
    let quick = sample(
        &body,
        "ferrisson_hold_seconds_bucket{kind=\"lock\",le=\"0.1\"}",
    );
    assert_eq!(quick, Some(2.0), "{body}");
    let sum = sample(&body, "ferrisson_hold_seconds_sum{kind=\"lock\"}").unwrap();
    assert!(sum >= 0.12, "{sum}");
}
