//! The README's block of the three self-healing limits is `readme_limits_snippet.rs`, word for
//! word, and it runs against a real Redis, again after Redis lost every key.

#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common;

#[path = "readme_limits_snippet.rs"]
mod snippet;

#[test]
fn the_readme_shows_the_limits_snippet_this_test_runs() {
    let readme = include_str!("../../README.md");
    let code = common::fenced_code(common::marked_section(readme, "limits"), "```rust");
    assert_eq!(code, include_str!("readme_limits_snippet.rs"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_limits_snippet_runs_and_heals_after_redis_lost_its_data() {
    let server = common::RedisServer::spawn();
    let client = common::client(&server.url()).await;
    snippet::limits(&client).await.unwrap();
    let _: () = redis::cmd("FLUSHALL")
        .query(&mut server.connection())
        .unwrap();
    snippet::limits(&client).await.unwrap();
    client.shutdown().await.unwrap();
}
