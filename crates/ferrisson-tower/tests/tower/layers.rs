//! The layers against a real Redis: several clients (instances), each with its own service
//! stack, never above the concurrency limit or the rate together; permits back when response
//! futures complete or are dropped; a maximum wait sheds with `LimitExceeded`.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ferrisson_expirable_semaphore::ExpirableSemaphore;
use ferrisson_rate_limiter::{RateLimiter, RateType};
use ferrisson_semaphore::{Client, Semaphore};
use ferrisson_testkit::{TestRedis, unique_name};
use ferrisson_tower::{
    BoxError, DistributedConcurrencyLimitLayer, DistributedRateLimitLayer, LimitExceeded,
    PermitSource,
};
use tower::{Service, ServiceBuilder, ServiceExt};

const SOON: Duration = Duration::from_secs(20);

async fn clients(url: &str, n: usize) -> Vec<Client> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(Client::connect(url).await.unwrap());
    }
    out
}

/// 60 calls through 3 instances' stacks over `source(client)`, each call 20 ms: the most in
/// flight at once.
async fn most_in_flight<S: PermitSource>(
    clients: &[Client],
    source: impl Fn(&Client) -> S,
) -> usize {
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for (i, client) in clients.iter().enumerate() {
        let (inside, most) = (inside.clone(), most.clone());
        let service = ServiceBuilder::new()
            .layer(DistributedConcurrencyLimitLayer::new(source(client)))
            .service_fn(move |call: usize| {
                let (inside, most) = (inside.clone(), most.clone());
                async move {
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    inside.fetch_sub(1, Ordering::SeqCst);
                    Ok::<_, BoxError>(call)
                }
            });
        for call in 0..20 {
            let mut service = service.clone();
            let call = i * 100 + call;
            tasks.push(tokio::spawn(async move {
                service.ready().await.unwrap().call(call).await.unwrap()
            }));
        }
    }
    for (n, task) in tasks.into_iter().enumerate() {
        let got = tokio::time::timeout(SOON, task).await.unwrap().unwrap();
        assert_eq!(got, (n / 20) * 100 + n % 20);
    }
    most.load(Ordering::SeqCst)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_instances_stay_within_the_concurrency_limit_of_either_semaphore() {
    let redis = TestRedis::any();
    let clients = clients(&redis.url(), 3).await;
    let name = unique_name("tower-sem");
    assert!(
        Semaphore::new(&clients[0], &name)
            .unwrap()
            .try_set_permits(4)
            .await
            .unwrap()
    );
    let most = most_in_flight(&clients, |c| Semaphore::new(c, &name).unwrap()).await;
    assert!((1..=4).contains(&most), "{most} in flight with 4 permits");
    // Permits go back when the responses are in, in the background.
    let sem = Semaphore::new(&clients[0], &name).unwrap();
    let deadline = tokio::time::Instant::now()
        .checked_add(SOON)
        .expect("a test's patience fits the clock");
    while sem.available_permits().await.unwrap() != 4 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "every permit came back"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let name = unique_name("tower-exp");
    let exp = ExpirableSemaphore::new(&clients[0], &name).unwrap();
    assert!(exp.try_set_permits(3).await.unwrap());
    let most = most_in_flight(&clients, |c| ExpirableSemaphore::new(c, &name).unwrap()).await;
    assert!((1..=3).contains(&most), "{most} in flight with 3 permits");
    let deadline = tokio::time::Instant::now()
        .checked_add(SOON)
        .expect("a test's patience fits the clock");
    while exp.available_permits().await.unwrap() != 3 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "every permit came back"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_response_future_gives_its_permit_back_and_a_full_limit_sheds() {
    let redis = TestRedis::any();
    let client = Client::connect(&redis.url()).await.unwrap();
    let name = unique_name("tower-drop");
    let sem = Semaphore::new(&client, &name).unwrap();
    assert!(sem.try_set_permits(1).await.unwrap());
    let mut service = ServiceBuilder::new()
        .layer(
            DistributedConcurrencyLimitLayer::new(sem.clone())
                .with_max_wait(Duration::from_millis(100)),
        )
        .service_fn(|()| async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok::<_, BoxError>(())
        });
    let pending = service.ready().await.unwrap().call(());
    assert_eq!(
        sem.available_permits().await.unwrap(),
        0,
        "the call holds the permit"
    );
    // Another instance's call finds none within its wait: shed.
    let mut other = service.clone();
    let err = other.ready().await.unwrap_err();
    let shed = err.downcast_ref::<LimitExceeded>().unwrap();
    assert_eq!(shed.waited, Duration::from_millis(100));
    drop(pending);
    let deadline = tokio::time::Instant::now()
        .checked_add(SOON)
        .expect("a test's patience fits the clock");
    while sem.available_permits().await.unwrap() != 1 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the dropped call's permit came back"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // A service made ready and then dropped gives its permit back too.
    other.ready().await.unwrap();
    assert_eq!(
        sem.available_permits().await.unwrap(),
        0,
        "a ready service holds a permit"
    );
    drop(other);
    let deadline = tokio::time::Instant::now()
        .checked_add(SOON)
        .expect("a test's patience fits the clock");
    while sem.available_permits().await.unwrap() != 1 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the ready service's permit came back"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_instances_stay_within_the_rate_and_a_max_wait_sheds_the_rest() {
    let redis = TestRedis::any();
    let clients = clients(&redis.url(), 3).await;
    let name = unique_name("tower-rate");
    let limiter = RateLimiter::new(&clients[0], &name).unwrap();
    assert!(
        limiter
            .try_set_rate(RateType::Overall, 10, Duration::from_secs(60))
            .await
            .unwrap()
    );
    let served = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for client in &clients {
        let served = served.clone();
        let service = ServiceBuilder::new()
            .layer(
                DistributedRateLimitLayer::new(RateLimiter::new(client, &name).unwrap())
                    .with_max_wait(Duration::ZERO),
            )
            .service_fn(move |()| {
                let served = served.clone();
                async move {
                    served.fetch_add(1, Ordering::SeqCst);
                    Ok::<_, BoxError>(())
                }
            });
        for _ in 0..8 {
            let mut service = service.clone();
            tasks.push(tokio::spawn(async move {
                match service.ready().await {
                    Ok(ready) => ready.call(()).await.map(|()| true),
                    Err(e) if e.is::<LimitExceeded>() => Ok(false),
                    Err(e) => Err(e),
                }
            }));
        }
    }
    let mut allowed = 0;
    for task in tasks {
        if tokio::time::timeout(SOON, task)
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            allowed += 1;
        }
    }
    assert_eq!(
        allowed, 10,
        "exactly the rate in one window, across three instances"
    );
    assert_eq!(served.load(Ordering::SeqCst), 10);
}

/// axum's router takes a layer only if its service is `Send + Sync + Clone`: both services
/// are, whatever the inner service's future.
const _: fn() = || {
    fn fits_axum<T: Send + Sync + Clone + 'static>() {}
    type Inner = tower::util::BoxCloneSyncService<u32, u32, BoxError>;
    fits_axum::<ferrisson_tower::DistributedConcurrencyLimit<Inner, Semaphore>>();
    fits_axum::<ferrisson_tower::DistributedConcurrencyLimit<Inner, ExpirableSemaphore>>();
    fits_axum::<ferrisson_tower::DistributedRateLimit<Inner>>();
};
