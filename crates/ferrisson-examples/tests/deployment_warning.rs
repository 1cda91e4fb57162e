//! The warning a client logs at connect when its Redis breaks a guarantee the synchronizers
//! rely on (`ClientConfig::with_deployment_warning`), and its opt-out.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferrisson::{Client, ClientConfig};
use ferrisson_testkit::RedisServer;
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// The messages of every warning logged by `ferrisson_core::doctor`, and whether its check at
/// connect has finished.
#[derive(Clone, Default)]
struct Warnings(Arc<Mutex<Vec<String>>>, Arc<Mutex<bool>>);

struct Message<'a>(&'a mut String);

impl Visit for Message<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            *self.0 = format!("{value:?}");
        }
    }
}

impl<S: tracing::Subscriber> Layer<S> for Warnings {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        let meta = event.metadata();
        if meta.target() != "ferrisson_core::doctor" {
            return;
        }
        let mut message = String::new();
        event.record(&mut Message(&mut message));
        if *meta.level() == tracing::Level::WARN {
            self.0.lock().unwrap().push(message);
        } else if message.contains("checked at connect") {
            *self.1.lock().unwrap() = true;
        }
    }
}

/// Connects to a server with `args` (with `warn` the warning on), and returns the warnings
/// logged by the time its check at connect has finished.
fn warnings_at_connect(args: &[&str], warn: bool) -> Vec<String> {
    let warnings = Warnings::default();
    let subscriber = tracing_subscriber::registry().with(warnings.clone());
    let _default = tracing::subscriber::set_default(subscriber);
    // One thread: the background check runs where the subscriber is set.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let server = RedisServer::try_spawn_with(args).unwrap_or_else(|e| panic!("{e}"));
        let client =
            Client::with_config(ClientConfig::new(server.url()).with_deployment_warning(warn))
                .await
                .unwrap();
        if warn {
            // Until the check (one INFO) says it is done.
            let deadline = tokio::time::Instant::now()
                .checked_add(Duration::from_secs(10))
                .expect("a deadline ten seconds out");
            while !*warnings.1.lock().unwrap() {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the check at connect never finished"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        client.shutdown().await.unwrap();
        // Off, nothing was sent to finish.
        assert_eq!(*warnings.1.lock().unwrap(), warn);
    });
    warnings.0.lock().unwrap().clone()
}

#[test]
fn a_redis_that_keeps_nothing_and_evicts_is_named_in_one_warning_at_connect() {
    let got = warnings_at_connect(
        &["--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru"],
        true,
    );
    assert_eq!(got.len(), 1, "one warning: {got:?}");
    assert!(got[0].contains("eviction"), "{got:?}");
    assert!(got[0].contains("persistence"), "{got:?}");
    assert!(got[0].contains("ferrisson doctor"), "{got:?}");
}

#[test]
fn a_redis_that_keeps_the_guarantees_gets_no_warning_and_the_warning_can_be_turned_off() {
    let kept = warnings_at_connect(&["--appendonly", "yes", "--appendfsync", "always"], true);
    assert!(kept.is_empty(), "{kept:?}");
    let off = warnings_at_connect(&[], false);
    assert!(off.is_empty(), "{off:?}");
}
