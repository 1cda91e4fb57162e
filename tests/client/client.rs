//! Building a client: from a URL, a config parsed from one, or an existing `redis::Client`;
//! credentials checked at connect; work run only while a hold lasts.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common;

use ferrisson::Lock;

use std::time::Duration;

use common::{RedisServer, client, client_with_lease, unique_name};
use ferrisson::{Client, ClientConfig, Error, LossReason, ReentrantLock};

#[tokio::test]
async fn a_client_comes_from_a_url_a_parsed_config_or_a_redis_client() {
    let server = RedisServer::spawn();
    let config: ClientConfig = server.url().parse().unwrap();
    let from_config = Client::with_config(config.with_namespace("app:"))
        .await
        .unwrap();
    let namespaced = ReentrantLock::new(&from_config, "x").unwrap();
    assert_eq!(namespaced.key(), "app:x");
    assert!(matches!(
        "not a url".parse::<ClientConfig>(),
        Err(Error::InvalidArgument(_))
    ));

    let redis_client = redis::Client::open(server.url()).unwrap();
    let from_redis = Client::from_redis_client(redis_client, ClientConfig::default())
        .await
        .unwrap();
    let name = unique_name("client-kinds");
    let guard = ReentrantLock::new(&from_redis, &name)
        .unwrap()
        .lock()
        .await
        .unwrap();
    let seen_by_url = ReentrantLock::new(&client(&server.url()).await, &name).unwrap();
    assert!(seen_by_url.is_locked().await.unwrap());
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn missing_or_wrong_credentials_fail_at_connect() {
    let server = RedisServer::spawn();
    let mut con = server.connection();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg("s3cret")
        .query(&mut con)
        .unwrap();
    let err = Client::connect(&server.url()).await.unwrap_err();
    assert!(
        err.to_string().to_uppercase().contains("NOAUTH")
            || err.to_string().to_lowercase().contains("auth"),
        "{err}"
    );
    let wrong = format!("redis://:wrong@127.0.0.1:{}", server.port());
    assert!(Client::connect(&wrong).await.is_err());
    let right = format!("redis://:s3cret@127.0.0.1:{}", server.port());
    let client = Client::connect(&right).await.unwrap();
    let lock = ReentrantLock::new(&client, &unique_name("auth")).unwrap();
    lock.lock().await.unwrap().unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_runs_only_while_the_hold_lasts() {
    let server = RedisServer::spawn();
    let holder = client_with_lease(&server.url(), Duration::from_millis(300)).await;
    let other = client(&server.url()).await;
    let name = unique_name("while-held");
    let lock = ReentrantLock::new(&holder, &name).unwrap();

    let guard = lock.lock().await.unwrap();
    assert_eq!(guard.while_held(async { 7 }).await.unwrap(), 7);

    // Someone else takes the lock away: the work is cut off with the reason.
    let cut = tokio::spawn(async move {
        let outcome = guard.while_held(std::future::pending::<()>()).await;
        (outcome, guard)
    });
    ReentrantLock::new(&other, &name)
        .unwrap()
        .force_unlock()
        .await
        .unwrap();
    let (outcome, guard) = tokio::time::timeout(Duration::from_secs(10), cut)
        .await
        .expect("cut off within a lease")
        .unwrap();
    assert!(
        matches!(outcome, Err(Error::LeaseLost(LossReason::NotHeld))),
        "{outcome:?}"
    );
    // Once lost, no work starts at all.
    assert!(matches!(
        guard.while_held(async { 1 }).await,
        Err(Error::LeaseLost(_))
    ));
}

/// An ACL user that may not publish on the synchronizers' channels is refused at connect with
/// a clear error, before a release could run half (Redis does not roll a script back when its
/// PUBLISH is refused, so the release would have happened and reported an error).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_that_may_not_publish_is_refused_at_connect() {
    let server = RedisServer::spawn();
    let mut con = server.connection();
    let users: [(&str, &[&str]); 3] = [
        // No @pubsub at all.
        ("nopubsub", &["on", ">pw", "~*", "&*", "+@all", "-@pubsub"]),
        // Redis 7's default for a new user: no channel may be used.
        ("nochannels", &["on", ">pw", "~*", "resetchannels", "+@all"]),
        // What ferrisson needs: its keys, its channels, scripting and pub/sub.
        ("enough", &["on", ">pw", "~*", "&redisson_*", "+@all"]),
    ];
    for (user, rules) in users {
        let _: () = redis::cmd("ACL")
            .arg("SETUSER")
            .arg(user)
            .arg(rules)
            .query(&mut con)
            .unwrap();
    }
    let url = |user: &str| format!("redis://{user}:pw@127.0.0.1:{}", server.port());
    for user in ["nopubsub", "nochannels"] {
        let err = Client::connect(&url(user)).await.unwrap_err();
        assert!(matches!(err, Error::NotPermitted(_)), "{user}: {err:?}");
        assert!(err.to_string().contains("+@pubsub"), "{user}: {err}");
    }
    let client = Client::connect(&url("enough")).await.unwrap();
    let name = unique_name("acl");
    let lock = ReentrantLock::new(&client, &name).unwrap();
    lock.lock().await.unwrap().unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
}

/// Connection and URL errors name the address or URL (never its password) and say what to do:
/// a URL without a scheme, an empty one, another scheme; a refused connection, a frozen server,
/// a service that does not speak Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_and_url_errors_name_the_address_and_say_what_to_do() {
    let server = RedisServer::spawn();
    let bare = format!("127.0.0.1:{}", server.port());
    for (url, says) in [
        (bare.as_str(), format!("write `redis://{bare}`")),
        ("", "no Redis URL given".to_owned()),
        (
            "http://127.0.0.1:1/",
            "`http://` is not a Redis URL scheme".to_owned(),
        ),
    ] {
        let err = Client::connect(url).await.unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{url:?}: {err:?}");
        let text = err.to_string();
        assert!(text.contains(&says), "{url:?}: {text}");
        assert!(
            text.contains("redis://[user:password@]host:port"),
            "{url:?}: {text}"
        );
    }

    // Refused: the address (password hidden) and what to check.
    let mut down = RedisServer::spawn();
    let port = down.port();
    down.stop();
    let err = Client::connect(&format!("redis://app:s3cret@127.0.0.1:{port}"))
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(err.is_connection_error(), "{err:?}");
    assert!(
        matches!(&err, Error::Unreachable { address, .. } if address.contains(&format!("127.0.0.1:{port}"))),
        "{err:?}"
    );
    assert!(!text.contains("s3cret"), "the password shows: {text}");
    assert!(text.contains("is redis-server running"), "{text}");

    // Frozen: no reply in time, with the address and the settings that bound the wait.
    server.pause();
    let frozen = ClientConfig::new(server.url())
        .with_connect_timeout(Duration::from_millis(300))
        .with_response_timeout(Duration::from_millis(300));
    let err = Client::with_config(frozen).await.unwrap_err();
    server.resume();
    let text = err.to_string();
    assert!(text.contains(&server.url()), "{text}");
    assert!(text.contains("no reply in time"), "{text}");

    // Something that is not Redis on the port.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let http = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for stream in listener.incoming().flatten().take(4) {
            let mut stream = stream;
            let mut buf = [0u8; 256];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        }
    });
    let err = Client::connect(&format!("redis://127.0.0.1:{http}"))
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(text.contains(&format!("127.0.0.1:{http}")), "{text}");
    assert!(text.contains("does not speak the Redis protocol"), "{text}");
}

/// Redis answers but refuses the client: wrong or missing credentials, a database index the
/// server does not have, an ACL user without the rights the synchronizers need. Each is a
/// clear error naming the address and the cause, never "unreachable" or "check the network".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_at_connect_name_their_cause_not_the_network() {
    let server = RedisServer::spawn();
    let mut con = server.connection();
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("app")
        .arg(&["on", ">pw", "~*", "&*", "+@all"][..])
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("noscripts")
        .arg(&["on", ">pw", "~*", "&*", "+@all", "-@scripting"][..])
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("nothing")
        .arg(&["on", ">pw", "~*", "&*"][..])
        .query(&mut con)
        .unwrap();
    let port = server.port();
    let address = format!("127.0.0.1:{port}");
    let cases = [
        (format!("redis://app:wrong@{address}"), "password"),
        (format!("redis://ghost:pw@{address}"), "password"),
        (format!("redis://app:pw@{address}/99"), "database 99"),
        (format!("redis://nothing:pw@{address}"), "ACL"),
        (format!("redis://noscripts:pw@{address}"), "ACL"),
    ];
    for (url, says) in cases {
        let err = Client::with_config(
            ClientConfig::new(&url)
                .with_connect_timeout(Duration::from_secs(2))
                .with_response_timeout(Duration::from_secs(2)),
        )
        .await
        .unwrap_err();
        let text = err.to_string();
        assert!(
            !matches!(err, Error::Unreachable { .. }) && !err.is_connection_error(),
            "{url}: {err:?}"
        );
        assert!(!text.contains("check the network"), "{url}: {text}");
        assert!(
            !text.contains(":pw@") && !text.contains("wrong@"),
            "{url}: {text}"
        );
        assert!(
            text.contains(&address),
            "{url}: the address is not named: {text}"
        );
        assert!(text.contains(says), "{url}: {text} (wanted {says:?})");
    }
    // The right ones connect.
    let client = Client::connect(&format!("redis://app:pw@{address}/3"))
        .await
        .unwrap();
    let lock = ReentrantLock::new(&client, &unique_name("refusals")).unwrap();
    lock.lock().await.unwrap().unlock().await.unwrap();
}
