//! The rate limiter against a real Redis: four clients never exceed the rate in any window,
//! waiters get permits as soon as the window gives them back, a rate change takes effect,
//! per-client rates, bad arguments, and Redisson's layout.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use ferrisson::AcquireOptions;
use ferrisson::Error;
use ferrisson_rate_limiter::{RateLimiter, RateType};
use redis::Commands;

/// The server's clock in ms (the limiter's window runs on it).
fn server_ms(con: &mut redis::Connection) -> u64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(con).unwrap();
    s * 1000 + us / 1000
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_clients_never_exceed_the_rate_in_any_window() {
    let redis = TestRedis::any();
    let name = unique_name("rate");
    let (rate, interval) = (5u64, Duration::from_millis(400));
    let first = client(&redis.url()).await;
    assert!(
        RateLimiter::new(&first, &name)
            .unwrap()
            .try_set_rate(RateType::Overall, rate, interval)
            .await
            .unwrap()
    );
    let grants = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let client = client(&redis.url()).await;
        let grants = grants.clone();
        let url = redis.url();
        let name = name.clone();
        tasks.push(tokio::spawn(async move {
            let limiter = RateLimiter::new(&client, &name).unwrap();
            let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
            // Five intervals' worth of asking.
            for _ in 0..5 {
                limiter.acquire(1).await.unwrap();
                let at = server_ms(&mut con);
                grants.lock().unwrap().push(at);
            }
        }));
    }
    join_within(Duration::from_secs(30), "every grant", tasks).await;
    let mut grants = grants.lock().unwrap().clone();
    grants.sort_unstable();
    assert_eq!(grants.len(), 20);
    // In any window of the interval (less a little for the time between the grant and its
    // stamp), no more than the rate.
    let window = u64::try_from(interval.as_millis()).unwrap() - 20;
    for (i, start) in grants.iter().enumerate() {
        let inside = grants[i..]
            .iter()
            .take_while(|t| **t < start + window)
            .count();
        assert!(
            inside as u64 <= rate,
            "{inside} grants within {window} ms from {start}: {grants:?}"
        );
    }
    // 20 permits at 5 per 400 ms take at least three full intervals after the first five.
    assert!(grants[19] - grants[0] >= 3 * window, "{grants:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_get_permits_as_the_window_gives_them_back_and_a_rate_change_takes_effect() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    let limiter = RateLimiter::new(&a, &unique_name("rate-wait")).unwrap();
    limiter
        .set_rate(RateType::Overall, 2, Duration::from_millis(500))
        .await
        .unwrap();
    assert_eq!(
        limiter.rate().await.unwrap(),
        Some((RateType::Overall, 2, Duration::from_millis(500)))
    );
    assert!(
        !limiter
            .try_set_rate(RateType::Overall, 9, Duration::from_secs(1))
            .await
            .unwrap()
    );
    let started = tokio::time::Instant::now();
    assert!(limiter.try_acquire(2).await.unwrap());
    assert!(!limiter.try_acquire(1).await.unwrap());
    // Not before the window allows, and not much after (the script says when).
    assert!(
        !limiter
            .try_acquire_with(
                1,
                AcquireOptions::new().with_wait(Duration::from_millis(100))
            )
            .await
            .unwrap(),
        "the permits come back too late for a 100 ms wait, which says so at once"
    );
    assert!(started.elapsed() < Duration::from_millis(400));
    limiter.acquire(1).await.unwrap();
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(450), "{waited:?}");
    assert!(waited < Duration::from_millis(1_500), "{waited:?}");

    // A new rate starts afresh: five at once now.
    limiter
        .set_rate(RateType::Overall, 5, Duration::from_secs(10))
        .await
        .unwrap();
    assert!(limiter.try_acquire(5).await.unwrap());
    assert!(!limiter.try_acquire(1).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_client_rates_and_bad_arguments() {
    let redis = TestRedis::any();
    let (a, b) = (client(&redis.url()).await, client(&redis.url()).await);
    let name = unique_name("rate-client");
    let la = RateLimiter::new(&a, &name).unwrap();
    let lb = RateLimiter::new(&b, &name).unwrap();
    // No rate yet.
    assert!(matches!(la.try_acquire(1).await, Err(Error::NotSetUp(_))));
    assert!(la.rate().await.unwrap().is_none());
    for (rate, interval) in [
        (0, Duration::from_secs(1)),
        (1, Duration::ZERO),
        (1, Duration::from_micros(500)),
        (1, Duration::MAX),
    ] {
        assert!(
            matches!(
                la.try_set_rate(RateType::Overall, rate, interval).await,
                Err(Error::InvalidArgument(_))
            ),
            "{rate} per {interval:?}"
        );
    }
    la.set_rate(RateType::PerClient, 2, Duration::from_secs(10))
        .await
        .unwrap();
    // More than the rate can ever give is an error, not a wait forever; zero is granted.
    assert!(matches!(
        la.acquire(3).await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(la.try_acquire(0).await.unwrap());
    // Each client has the rate to itself.
    assert!(la.try_acquire(2).await.unwrap());
    assert!(!la.try_acquire(1).await.unwrap());
    assert!(lb.try_acquire(2).await.unwrap());
    // Redisson's layout: the settings hash, the per-client permits ZSET.
    let mut con = redis.connection();
    let settings: std::collections::HashMap<String, String> = con.hgetall(&name).unwrap();
    assert_eq!(settings.get("rate").map(String::as_str), Some("2"));
    assert_eq!(settings.get("interval").map(String::as_str), Some("10000"));
    assert_eq!(settings.get("type").map(String::as_str), Some("1"));
    let given: u64 = con.zcard(format!("{{{name}}}:permits:{}", a.id())).unwrap();
    assert_eq!(given, 1, "one entry for the two permits taken at once");
    let left: u64 = con.get(format!("{{{name}}}:value:{}", a.id())).unwrap();
    assert_eq!(left, 0);
    // A foreign key at the name is a clear error.
    let foreign = unique_name("rate-foreign");
    let _: () = con.set(&foreign, "not a limiter").unwrap();
    let err = RateLimiter::new(&a, &foreign)
        .unwrap()
        .try_acquire(1)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::WrongType { .. }), "{err}");
}
