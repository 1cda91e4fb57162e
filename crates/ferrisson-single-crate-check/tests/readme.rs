//! The README's single-crate snippet is this crate's `snippet` module, and it runs.
#![allow(clippy::unwrap_used, clippy::panic)]

#[test]
fn the_readme_shows_the_snippet_this_crate_compiles() {
    let readme = include_str!("../../../README.md");
    let section = ferrisson_testkit::marked_section(readme, "single-crate");
    let code = ferrisson_testkit::fenced_code(section, "```rust");
    assert_eq!(code, include_str!("../src/snippet.rs"));
}

#[tokio::test]
async fn the_snippet_runs_against_a_real_redis() {
    let server = ferrisson_testkit::TestRedis::any();
    ferrisson_single_crate_check::snippet::call_partner(&server.url())
        .await
        .unwrap();
}
