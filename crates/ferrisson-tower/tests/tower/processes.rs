//! Both layers on outgoing calls from three processes under load: a stand-in API in this
//! process counts the calls in flight and when each arrived; three worker processes (this
//! binary again, running the ignored `worker` test) call it through a
//! `DistributedConcurrencyLimitLayer` over an expirable semaphore and a
//! `DistributedRateLimitLayer`. Never above the concurrency limit, never above the rate in
//! any window.
#![allow(clippy::unwrap_used, clippy::panic, clippy::print_stdout)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferrisson_expirable_semaphore::ExpirableSemaphore;
use ferrisson_rate_limiter::{RateLimiter, RateType};
use ferrisson_semaphore::Client;
use ferrisson_testkit::{RedisServer, unique_name};
use ferrisson_tower::{BoxError, DistributedConcurrencyLimitLayer, DistributedRateLimitLayer};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tower::{Service, ServiceBuilder, ServiceExt};

const PERMITS: u32 = 3;
const RATE: u64 = 12;
const INTERVAL: Duration = Duration::from_secs(1);
const WORKERS: usize = 3;
const CALLS_PER_WORKER: usize = 12;

/// One call to the stand-in API: a line out, a line back.
async fn call_api(addr: String) -> Result<(), BoxError> {
    let stream = tokio::net::TcpStream::connect(&addr).await?;
    let (read, mut write) = stream.into_split();
    write.write_all(b"call\n").await?;
    let mut line = String::new();
    BufReader::new(read).read_line(&mut line).await?;
    if line.trim() == "ok" {
        Ok(())
    } else {
        Err(format!("the API answered {line:?}").into())
    }
}

/// Not a test: a worker process's body (see the test below).
#[test]
#[ignore = "run by the test below as a separate process"]
fn worker() {
    let Some([url, api, name]) =
        ferrisson_testkit::worker_env(["WORKER_URL", "WORKER_API", "WORKER_NAME"])
    else {
        return;
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async move {
        let client = Client::connect(&url).await.unwrap();
        let slots = ExpirableSemaphore::new(&client, &format!("{name}:slots")).unwrap();
        let rate = RateLimiter::new(&client, &format!("{name}:rate")).unwrap();
        let service = ServiceBuilder::new()
            .layer(DistributedConcurrencyLimitLayer::new(slots))
            .layer(DistributedRateLimitLayer::new(rate))
            .service_fn(call_api);
        let calls: Vec<_> = (0..CALLS_PER_WORKER)
            .map(|_| {
                let mut service = service.clone();
                let api = api.clone();
                tokio::spawn(async move { service.ready().await?.call(api).await })
            })
            .collect();
        for call in calls {
            call.await.unwrap().unwrap();
        }
        client.shutdown().await.unwrap();
        println!("worker done");
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_stay_within_both_limits() {
    let server = RedisServer::spawn();
    let url = server.url();
    let name = unique_name("tower-procs");
    let client = Client::connect(&url).await.unwrap();
    let slots = ExpirableSemaphore::new(&client, &format!("{name}:slots")).unwrap();
    assert!(slots.try_set_permits(PERMITS).await.unwrap());
    let rate = RateLimiter::new(&client, &format!("{name}:rate")).unwrap();
    assert!(
        rate.try_set_rate(RateType::Overall, RATE, INTERVAL)
            .await
            .unwrap()
    );

    // The stand-in API: each call takes 40 ms.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let api = listener.local_addr().unwrap().to_string();
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let arrivals = Arc::new(Mutex::new(Vec::<Instant>::new()));
    {
        let (inside, most, arrivals) = (inside.clone(), most.clone(), arrivals.clone());
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (inside, most, arrivals) = (inside.clone(), most.clone(), arrivals.clone());
                tokio::spawn(async move {
                    let (read, mut write) = stream.into_split();
                    let mut line = String::new();
                    if BufReader::new(read).read_line(&mut line).await.is_err() {
                        return;
                    }
                    arrivals.lock().unwrap().push(Instant::now());
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(40)).await;
                    inside.fetch_sub(1, Ordering::SeqCst);
                    let _ = write.write_all(b"ok\n").await;
                });
            }
        });
    }

    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            ferrisson_testkit::rerun_test_as_process(
                "processes::worker",
                &[
                    ("WORKER_URL", &url),
                    ("WORKER_API", &api),
                    ("WORKER_NAME", &name),
                ],
            )
            .spawn()
            .unwrap()
        })
        .collect();
    let outputs = tokio::task::spawn_blocking(move || {
        workers
            .into_iter()
            .map(|w| w.wait_with_output().unwrap())
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    for out in outputs {
        assert!(out.status.success(), "a worker failed");
        assert!(String::from_utf8_lossy(&out.stdout).contains("worker done"));
    }

    let mut arrivals = arrivals.lock().unwrap().clone();
    assert_eq!(arrivals.len(), WORKERS * CALLS_PER_WORKER);
    let most = most.load(Ordering::SeqCst);
    assert!(
        (1..=PERMITS as usize).contains(&most),
        "{most} calls in flight with {PERMITS} permits"
    );
    // The rate: no window of the interval holds more than RATE arrivals (less 100 ms for the
    // way from the limiter to the API, which can bring two calls closer than they were let
    // through).
    arrivals.sort();
    let window = INTERVAL - Duration::from_millis(100);
    for (i, start) in arrivals.iter().enumerate() {
        let within = arrivals[i..]
            .iter()
            .take_while(|t| **t - *start < window)
            .count();
        assert!(within <= RATE as usize, "{within} calls within {window:?}");
    }
    // 36 calls at 12 a second take at least two intervals.
    let spread = *arrivals.last().unwrap() - arrivals[0];
    assert!(
        spread >= 2 * INTERVAL - Duration::from_millis(100),
        "{spread:?}"
    );
    assert_eq!(slots.available_permits().await.unwrap(), i64::from(PERMITS));
}
