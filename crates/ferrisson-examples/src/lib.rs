//! ferrisson's examples and tests that need heavy crates of their own (tracing-subscriber, the
//! Prometheus exporter, tower, axum), in a package of their own so that the facade's
//! dev-dependencies, which every example of the facade builds, stay light. Nothing to import:
//! run them with `cargo run -p ferrisson-examples --example <name>`.
