//! Shutting a client down: refusing new work, giving back what is held, letting the
//! background's cleanups land.

use std::time::Duration;

use super::{Client, ClientEngine, ShutdownReport};
use crate::error::{Error, Result};

impl Client {
    /// Shuts the client down before the process ends, so that nothing it holds is lost:
    /// [`shutdown_timeout`](Self::shutdown_timeout) with the client's retry window (how long
    /// a release may take to settle through a lost reply).
    ///
    /// Call it last in `main`: releases of dropped guards and permits run in the background
    /// on the runtime, and a runtime that ends with `main` stops them half way, leaving a
    /// lock held for its whole lease (and a plain semaphore's permits taken for good).
    /// Shutdown waits for them, and gives back at once what guards still alive hold. From a
    /// Ctrl-C/SIGTERM handler, where work may still be running, give it time to finish with
    /// [`shutdown_report`](Self::shutdown_report) (`crates/ferrisson-examples/examples/graceful_shutdown.rs`).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = ferrisson_testkit::RedisServer::spawn();
    /// # let url = server.url();
    /// use ferrisson_core::Client;
    ///
    /// let client = Client::connect(&url).await?;
    /// // ... take locks and permits, drop their guards ...
    /// client.shutdown().await?; // the releases of dropped guards have all landed
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// Dropping the call stops only the waiting: the client stays shut, and the cleanups go
    /// on in the background while the runtime lives.
    ///
    /// # Errors
    ///
    /// As [`shutdown_timeout`](Self::shutdown_timeout).
    pub async fn shutdown(&self) -> Result<()> {
        self.shutdown_timeout(self.retry_window()).await
    }

    /// Shuts the client down as [`shutdown_report`](Self::shutdown_report) does with no grace
    /// for work in flight (what live guards hold is given back at once), waiting at most
    /// `timeout` for the background's cleanups, and says whether anything was left.
    ///
    /// # Cancel safety
    ///
    /// As [`shutdown`](Self::shutdown).
    ///
    /// # Errors
    ///
    /// [`Error::Unfinished`] saying what was left ([`ShutdownReport::is_complete`] is false):
    /// holds or permits that could not be given back (Redis unreachable: a lock then ends
    /// with its lease, a plain semaphore's permits stay taken), and cleanups still running.
    pub async fn shutdown_timeout(&self, timeout: Duration) -> Result<()> {
        let report = self.close_and_give_back(Duration::ZERO, timeout).await;
        if report.is_complete() {
            Ok(())
        } else {
            Err(Error::Unfinished(report.to_string()))
        }
    }

    /// Shuts the client down and gives back everything it holds, then says what it did:
    ///
    /// 1. **New work is refused**: every acquisition of every clone fails with
    ///    [`Error::Closed`] from now on, and calls still waiting end with it.
    /// 2. **Work in flight may finish**: it waits up to `grace` for the guards and permits
    ///    still alive to be released or dropped by the work that holds them.
    /// 3. **What is still held is given back**: the loss signal of every live hold fires
    ///    ([`LossReason::ClientShutDown`](crate::LossReason::ClientShutDown)), so that work
    ///    still running learns that it has lost it, and the shutdown releases it (locks of
    ///    every kind, expirable permits) and returns plain semaphores' permits. A guard
    ///    released after this has nothing to release: its `unlock` is
    ///    [`Error::LeaseLost`] with that reason.
    /// 4. **The background's cleanups land**: releases of dropped guards, undos of abandoned
    ///    acquires and queue exits, waited for up to the client's retry window.
    ///
    /// A second call does what is still to do. Guards dropped later, while the runtime lives,
    /// still release in the background; acquisitions stay refused.
    ///
    /// # Cancel safety
    ///
    /// As [`shutdown`](Self::shutdown).
    pub async fn shutdown_report(&self, grace: Duration) -> ShutdownReport {
        self.close_and_give_back(grace, self.retry_window()).await
    }

    /// The shutdown's steps, with `grace` for work in flight and up to `cleanups` for the
    /// background's cleanups.
    async fn close_and_give_back(&self, grace: Duration, cleanups: Duration) -> ShutdownReport {
        let inner = &self.inner;
        inner.closing.cancel();
        // Waiters asleep on the subscriber connection look now, and end.
        inner.hub.wake_all();
        let finished = tokio::time::timeout(grace, inner.holds.emptied())
            .await
            .is_ok();
        tracing::debug!(
            finished,
            live = inner.holds.count(),
            "shutdown: the grace for work in flight is over"
        );
        // Work still running learns it has lost what it holds, before it is given back.
        inner.watchdog.shut_down();
        let live = inner.holds.take_all();
        let outcomes = futures::future::join_all(live.into_iter().map(|hold| {
            let what = hold.what();
            async move { (what, hold.give_back().await) }
        }))
        .await;
        let mut report = ShutdownReport::default();
        for (what, outcome) in outcomes {
            match outcome {
                Ok(true) => report.given_back.push(what),
                Ok(false) => report.already_gone.push(what),
                Err(e) => {
                    tracing::warn!(%what, error = %e, "shutdown: could not give it back");
                    report.not_given_back.push((what, e.to_string()));
                }
            }
        }
        inner.tasks.close();
        if tokio::time::timeout(cleanups, inner.tasks.wait())
            .await
            .is_err()
        {
            report.cleanups_pending = inner.tasks.len();
        }
        if inner.config.client_record() {
            // The record goes with the client; when Redis is unreachable it ends with its
            // lease.
            let del = redis::cmd("DEL").arg(inner.identity.key()).clone();
            if let Ok(Err(e)) =
                tokio::time::timeout(inner.config.response_timeout, inner.conn.query(&del)).await
            {
                tracing::debug!(error = %e, "the client's record was not deleted: it ends with its lease");
            }
        }
        report.address.clone_from(&inner.address);
        tracing::debug!(%report, "client shut down");
        report
    }
}
