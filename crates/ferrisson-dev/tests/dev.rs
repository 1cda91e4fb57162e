//! The dev tools against the real Redis they start: a throwaway server that answers and goes
//! away when dropped, and a stand-in API whose report sees calls in flight and checks limits.
#![allow(clippy::unwrap_used, clippy::panic)]

use ferrisson_dev::{RedisServer, Report, StandInApi};

fn report(calls: usize, busiest_second: usize, most_in_flight: u32) -> Report {
    Report {
        calls,
        span_ms: 1_000,
        busiest_second,
        most_in_flight,
    }
}

#[test]
fn a_report_names_the_limit_that_was_broken() {
    assert!(report(12, 8, 3).check(12, Some(8), 3).is_ok());
    assert!(
        report(12, 20, 3).check(12, None, 3).is_ok(),
        "no rate to check"
    );
    let calls = report(11, 8, 3).check(12, Some(8), 3).unwrap_err();
    assert!(calls.to_string().contains("11 calls were made"), "{calls}");
    let rate = report(12, 9, 3).check(12, Some(8), 3).unwrap_err();
    assert!(rate.to_string().contains("the rate is 8/s"), "{rate}");
    let in_flight = report(12, 8, 4).check(12, Some(8), 3).unwrap_err();
    assert!(
        in_flight.to_string().contains("the limit is 3"),
        "{in_flight}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throwaway_server_serves_the_stand_in_and_goes_away_when_dropped() {
    let server = RedisServer::spawn().unwrap_or_else(|e| panic!("{e}"));
    let url = server.url();
    assert_eq!(url, format!("redis://127.0.0.1:{}", server.port()));

    let api = StandInApi::connect(&url, "dev-test:api").await.unwrap();
    api.reset().await.unwrap();
    let calls: Vec<_> = (0..3)
        .map(|_| {
            let api = api.clone();
            tokio::spawn(async move { api.call().await })
        })
        .collect();
    for call in calls {
        call.await.unwrap().unwrap();
    }
    let seen = api.report().await.unwrap();
    assert_eq!(seen.calls, 3);
    assert!(
        (1..=3).contains(&seen.most_in_flight),
        "{}",
        seen.most_in_flight
    );
    assert_eq!(seen.busiest_second, 3, "three calls started at once");
    seen.check(3, Some(3), 3).unwrap();
    assert!(seen.check(3, Some(2), 3).is_err());

    let port = server.port();
    drop(server);
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the server is gone"
    );
}
