//! Metrics through the [`metrics`](https://docs.rs/metrics) facade (feature `metrics`): the
//! application installs a recorder (Prometheus, StatsD, …) and gets these; without the feature
//! every function here is empty and compiles away.
//!
//! | name | type | labels |
//! |---|---|---|
//! | `ferrisson_acquire_seconds` | histogram: time from the call to the hold | `kind` |
//! | `ferrisson_wait_seconds` | histogram: the part of it spent waiting for a release | `kind` |
//! | `ferrisson_hold_seconds` | histogram: how long a hold lasted, from its acquisition to its unlock, drop or hand-off | `kind` |
//! | `ferrisson_acquisitions_total` | counter | `kind` |
//! | `ferrisson_timeouts_total` | counter: acquisitions that ran out of wait time | `kind` |
//! | `ferrisson_losses_total` | counter: holds lost | `reason` |
//! | `ferrisson_handoffs_total` | counter: releases handed straight to a local waiter | `kind` |
//! | `ferrisson_renewals_total` | counter: renewal script calls (each renews a batch) | |
//! | `ferrisson_renewal_failures_total` | counter: renewal calls that failed or timed out | |
//! | `ferrisson_script_reloads_total` | counter: scripts sent again after `NOSCRIPT` | `script` |
//! | `ferrisson_script_loads_total` | counter: `SCRIPT LOAD` rounds on a (re)connected server (every script the process has sent) | |
//! | `ferrisson_tracking_missed_total` | counter: tracked waits (a `Mutex` waiter behind another Redlock client's hold) that found the lock free at their re-check, not told by Redis | |
//! | `ferrisson_subscribed_channels` | gauge: channels the client's subscriber connection keeps | |
//! | `ferrisson_waiters` | gauge: calls waiting on a channel | |
//!
//! With [`ClientConfig::with_metric_names`](crate::ClientConfig::with_metric_names) the
//! acquisition, wait, timeout and hold metrics also carry a `name` label, the object's key: one
//! series per name, so only for a few fixed names (see the cardinality warning there).
//!
//! Each is described to the recorder with its help text and unit ([`describe`]) when the
//! process's first client connects; `crates/ferrisson-examples/examples/prometheus.rs` serves them with
//! `metrics-exporter-prometheus`, time histograms with buckets.
//!
//! `kind` is `lock`, `mutex`, `fair_lock`, `read_lock`, `write_lock`, `spin_lock`, `semaphore`,
//! `expirable_semaphore`, `latch` (a wait that saw the latch open), `rate_limiter` (permits
//! given), `multilock` or `redlock` (a group taken; each lock of one also counts under its own
//! kind, its `name` the group's first key); `ferrisson_hold_seconds` has the lock kinds and
//! `expirable_semaphore`, whose permits are holds (a plain semaphore's permits and a rate
//! limiter's are not). `reason` is a [`LossReason`]'s name. `ferrisson_waiters` counts every
//! call waiting on a channel, of any kind. Every acquisition, a latch's wait and a rate limiter's acquire included, runs in a
//! `ferrisson.acquire` span.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use tracing::Instrument;

use crate::error::LossReason;

/// How far an acquisition got: whether it had to wait for a release, and its tries.
#[doc(hidden)]
#[derive(Debug, Default)]
pub struct Progress {
    pub(crate) waited: AtomicBool,
    pub(crate) tries: AtomicU32,
    /// Its wait on record (`crate::waits`), from when it began waiting.
    ticket: std::sync::OnceLock<crate::waits::WaitTicket>,
    /// Told when the ticket is set.
    ticket_set: tokio::sync::Notify,
}

impl Progress {
    /// Counts a try (logged at `trace` with its number, in the acquisition's span).
    pub fn tried(&self) {
        let attempt = self.tries.fetch_add(1, Ordering::Relaxed).saturating_add(1);
        tracing::trace!(attempt, "try");
    }

    /// Notes that the call had to wait (its time then counts in `ferrisson_wait_seconds`).
    pub fn waited(&self) {
        self.waited.store(true, Ordering::Relaxed);
    }

    /// Notes that the call waits for `what` (its first try failed), on record in `waits`
    /// (the client's, when it keeps a record) until the acquisition ends.
    pub(crate) fn waiting(
        &self,
        waits: Option<&Arc<crate::waits::Waits>>,
        what: crate::waits::WaitFor<'_>,
    ) {
        self.waited();
        if let Some(waits) = waits
            && self.ticket.get().is_none()
            && self.ticket.set(waits.register(what)).is_ok()
        {
            self.ticket_set.notify_waiters();
        }
    }

    /// A deadlock verdict on the acquisition's wait, once there is one.
    pub(crate) async fn verdict(&self) -> String {
        loop {
            let set = self.ticket_set.notified();
            if let Some(ticket) = self.ticket.get() {
                return ticket.doom.verdict().await;
            }
            set.await;
        }
    }
}

/// `$metric!($name, labels)` with the labels `kind` and, when given, `name`: without a name,
/// the static form, which allocates nothing.
#[cfg(feature = "metrics")]
macro_rules! labelled {
    ($metric:ident, $name:expr, $kind:expr, $object:expr) => {
        match $object {
            None => metrics::$metric!($name, "kind" => $kind),
            Some(object) => {
                metrics::$metric!($name, "kind" => $kind, "name" => object.to_owned())
            }
        }
    };
}

/// Runs an acquisition of `kind` in `span` (which has an empty `attempts` field), then logs
/// there and counts how it ended. `run` gets the [`Progress`] to keep; `wait` is the call's
/// wait limit (`Some(zero)`: one try).
///
/// A combinator rather than an `async fn`: a waiter carries this future for as long as it
/// waits, and an `async fn` would keep its parameters twice over (as captures and as locals).
pub(crate) fn acquisition<T, F, Fut>(
    span: tracing::Span,
    kind: &'static str,
    name: Option<Arc<str>>,
    wait: Option<Duration>,
    run: F,
) -> impl std::future::Future<Output = crate::error::Result<Option<T>>>
where
    F: FnOnce(Arc<Progress>) -> Fut,
    Fut: std::future::Future<Output = crate::error::Result<Option<T>>>,
{
    use futures::FutureExt;
    let started = tokio::time::Instant::now();
    let progress = Arc::new(Progress::default());
    let inner = run(progress.clone()).instrument(span.clone());
    inner.map(move |outcome| {
        let took = started.elapsed();
        span.record("attempts", progress.tries.load(Ordering::Relaxed));
        match &outcome {
            Ok(Some(_)) => {
                let waited = if progress.waited.load(Ordering::Relaxed) {
                    took
                } else {
                    Duration::ZERO
                };
                acquired(kind, name.as_deref(), took, waited);
            }
            Ok(None) if wait != Some(Duration::ZERO) => {
                tracing::debug!(parent: &span, "ran out of wait time");
                timed_out(kind, name.as_deref());
            }
            Ok(None) => {}
            Err(e) => tracing::debug!(parent: &span, error = %e, "acquire failed"),
        }
        outcome
    })
}

/// Every metric's description and unit, given to the installed recorder (Prometheus prints
/// them as `# HELP` and `# TYPE`). A client calls it once per process when it connects; call
/// it yourself when the recorder is installed after the first client was made.
pub fn describe() {
    #[cfg(feature = "metrics")]
    {
        use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
        describe_histogram!(
            "ferrisson_acquire_seconds",
            Unit::Seconds,
            "Time from an acquire call to the hold, by synchronizer kind"
        );
        describe_histogram!(
            "ferrisson_wait_seconds",
            Unit::Seconds,
            "Time an acquisition spent waiting for a release, by kind"
        );
        describe_histogram!(
            "ferrisson_hold_seconds",
            Unit::Seconds,
            "How long a hold lasted, from its acquisition to its unlock, drop or hand-off, by kind"
        );
        describe_counter!(
            "ferrisson_acquisitions_total",
            Unit::Count,
            "Acquisitions that succeeded, by kind"
        );
        describe_counter!(
            "ferrisson_timeouts_total",
            Unit::Count,
            "Acquisitions that ran out of wait time, by kind"
        );
        describe_counter!(
            "ferrisson_losses_total",
            Unit::Count,
            "Holds lost before their release, by reason"
        );
        describe_counter!(
            "ferrisson_handoffs_total",
            Unit::Count,
            "Releases handed straight to a waiter of the same client, by kind"
        );
        describe_counter!(
            "ferrisson_renewals_total",
            Unit::Count,
            "Watchdog renewal script calls (each renews a batch of holds)"
        );
        describe_counter!(
            "ferrisson_renewal_failures_total",
            Unit::Count,
            "Watchdog renewal calls that failed or went unanswered"
        );
        describe_counter!(
            "ferrisson_script_reloads_total",
            Unit::Count,
            "Scripts sent again with their source after NOSCRIPT, by script"
        );
        describe_counter!(
            "ferrisson_script_loads_total",
            Unit::Count,
            "SCRIPT LOAD rounds on a new or reconnected server"
        );
        describe_counter!(
            "ferrisson_deadlocks_total",
            Unit::Count,
            "Waits that gave way to end a cycle of waits across processes (deadlock detection)"
        );
        describe_counter!(
            "ferrisson_tracking_missed_total",
            Unit::Count,
            "Tracked waits that found the lock free at their re-check: a wake-up Redis did not send"
        );
        describe_gauge!(
            "ferrisson_subscribed_channels",
            Unit::Count,
            "Channels the client's subscriber connection keeps"
        );
        describe_gauge!(
            "ferrisson_waiters",
            Unit::Count,
            "Calls waiting on a channel for a release"
        );
    }
}

/// [`describe`], once per process (at the first client's connect).
pub(crate) fn describe_once() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(describe);
}

/// A hold of `kind` (of the object `name`, with name labels) ended after `held` (only with
/// metrics on: without them, a hold's start is not even read from the clock).
#[cfg(feature = "metrics")]
pub(crate) fn held(kind: &'static str, name: Option<&str>, held: Duration) {
    labelled!(histogram, "ferrisson_hold_seconds", kind, name).record(held.as_secs_f64());
}

/// An acquisition succeeded after `took`, of which `waited` waiting for a release.
#[allow(unused_variables)]
pub(crate) fn acquired(kind: &'static str, name: Option<&str>, took: Duration, waited: Duration) {
    #[cfg(feature = "metrics")]
    {
        labelled!(counter, "ferrisson_acquisitions_total", kind, name).increment(1);
        labelled!(histogram, "ferrisson_acquire_seconds", kind, name).record(took.as_secs_f64());
        if !waited.is_zero() {
            labelled!(histogram, "ferrisson_wait_seconds", kind, name).record(waited.as_secs_f64());
        }
    }
}

/// An acquisition ran out of wait time.
#[allow(unused_variables)]
pub(crate) fn timed_out(kind: &'static str, name: Option<&str>) {
    #[cfg(feature = "metrics")]
    labelled!(counter, "ferrisson_timeouts_total", kind, name).increment(1);
}

/// A wait of `kind` gave way to end a deadlock.
#[allow(unused_variables)]
pub(crate) fn deadlocked(kind: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!("ferrisson_deadlocks_total", "kind" => kind).increment(1);
}

/// A hold was lost.
#[allow(unused_variables)]
pub(crate) fn lost(reason: LossReason) {
    #[cfg(feature = "metrics")]
    metrics::counter!("ferrisson_losses_total", "reason" => reason.name()).increment(1);
}

/// A release went straight to a local waiter.
#[allow(unused_variables)]
pub(crate) fn handed_off(kind: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!("ferrisson_handoffs_total", "kind" => kind).increment(1);
}

/// A renewal call was made; `failed` when it failed or went unanswered.
#[allow(unused_variables)]
pub(crate) fn renewed(failed: bool) {
    #[cfg(feature = "metrics")]
    {
        metrics::counter!("ferrisson_renewals_total").increment(1);
        if failed {
            metrics::counter!("ferrisson_renewal_failures_total").increment(1);
        }
    }
}

/// A script was sent again with its source after `NOSCRIPT`.
#[allow(unused_variables)]
pub(crate) fn script_reloaded(script: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!("ferrisson_script_reloads_total", "script" => script).increment(1);
}

/// A (re)connected server was given the `n` scripts this process had sent.
#[allow(unused_variables)]
pub(crate) fn scripts_loaded(n: usize) {
    #[cfg(feature = "metrics")]
    metrics::counter!("ferrisson_script_loads_total").increment(1);
}

/// A tracked wait found the lock free at its re-check ([`crate::TrackingStats::missed`]).
pub(crate) fn tracking_missed() {
    #[cfg(feature = "metrics")]
    metrics::counter!("ferrisson_tracking_missed_total").increment(1);
}

/// A channel was subscribed (`1.0`) or given up (`-1.0`).
#[allow(unused_variables)]
pub(crate) fn channels(delta: f64) {
    #[cfg(feature = "metrics")]
    metrics::gauge!("ferrisson_subscribed_channels").increment(delta);
}

/// A waiter registered (`1.0`) or left (`-1.0`).
#[allow(unused_variables)]
pub(crate) fn waiters(delta: f64) {
    #[cfg(feature = "metrics")]
    metrics::gauge!("ferrisson_waiters").increment(delta);
}
