//! The `tracing` spans a production service sees: one `ferrisson.acquire` span per acquisition,
//! with the kind, the key, the owner and the number of tries.
#![allow(clippy::unwrap_used, clippy::panic)]

#[path = "../../../tests/common/mod.rs"]
mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use ferrisson::{AcquireOptions, Lock, ReentrantLock};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// A closed span: its name and its fields.
type Closed = (String, HashMap<String, String>);

/// Every closed `ferrisson.*` span.
#[derive(Clone, Default)]
struct Spans(Arc<Mutex<Vec<Closed>>>);

#[derive(Default)]
struct Fields(HashMap<String, String>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(
            field.name().to_owned(),
            format!("{value:?}").trim_matches('"').to_owned(),
        );
    }
}

impl<S> Layer<S> for Spans
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(fields);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(fields) = span.extensions_mut().get_mut::<Fields>()
        {
            values.record(fields);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(&id)
            && span.name().starts_with("ferrisson.")
        {
            let fields = span
                .extensions()
                .get::<Fields>()
                .map(|f| f.0.clone())
                .unwrap_or_default();
            self.0
                .lock()
                .unwrap()
                .push((span.name().to_owned(), fields));
        }
    }
}

#[test]
fn acquisitions_and_releases_run_in_spans_with_kind_key_owner_and_tries() {
    let spans = Spans::default();
    let subscriber = tracing_subscriber::registry().with(
        spans
            .clone()
            .with_filter(tracing_subscriber::filter::LevelFilter::TRACE),
    );
    let _default = tracing::subscriber::set_default(subscriber);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let server = RedisServer::spawn();
        let client = client(&server.url()).await;
        let name = unique_name("spans");
        let lock = ReentrantLock::new(&client, &name).unwrap();
        let guard = lock.lock().await.unwrap();
        // A second caller tries, waits and gives up: more than one try.
        let other = ReentrantLock::new(&client, &name).unwrap();
        let none = other
            .try_lock_with(AcquireOptions::new().with_wait(Duration::from_millis(200)))
            .await
            .unwrap();
        assert!(none.is_none());
        guard.unlock().await.unwrap();
    });
    let spans = spans.0.lock().unwrap().clone();
    let acquires: Vec<&HashMap<String, String>> = spans
        .iter()
        .filter(|(name, _)| name == "ferrisson.acquire")
        .map(|(_, fields)| fields)
        .collect();
    assert_eq!(acquires.len(), 2, "{spans:?}");
    for fields in &acquires {
        assert_eq!(fields.get("kind").map(String::as_str), Some("lock"));
        assert!(
            fields
                .get("key")
                .is_some_and(|k| k.ends_with("spans-0") || k.contains("spans"))
        );
        assert!(
            fields.get("owner").is_some_and(|o| o.contains(':')),
            "{fields:?}"
        );
    }
    let tries = |i: usize| {
        acquires[i]
            .get("attempts")
            .and_then(|a| a.parse::<u32>().ok())
    };
    assert_eq!(tries(0), Some(1), "the uncontended lock took one try");
    assert!(
        tries(1).is_some_and(|n| n >= 2),
        "the waiting caller tried again after the wait: {:?}",
        acquires[1]
    );
    assert!(
        spans.iter().any(|(name, _)| name == "ferrisson.release"),
        "{spans:?}"
    );
}
