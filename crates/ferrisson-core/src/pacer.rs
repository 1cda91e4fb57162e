//! The pace of every wait ([`WaitPacer`]): its first try, the outage rule of the tries after
//! it, its sleeps, its deadline and shutdown.

use std::time::Duration;

use tokio::time::Instant;

use crate::error::{Error, Result};

/// How often a waiter re-checks while its subscription is not confirmed (pub/sub down).
pub(crate) const UNCONFIRMED_RECHECK: Duration = Duration::from_millis(500);

/// What the tries inside a compound round (a MultiLock's, whose locks wait, and wait out
/// outages, themselves) came to, as their pacers saw them: whether one reached Redis, and when
/// the outage they are in began. The round's own pacer ([`crate::drive`]) counts its outage
/// from then, not from the round's start, which may be long before.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RoundNote {
    /// A try of the round reached Redis.
    pub(crate) reached: bool,
    /// When the outage the round's last failed try is in began (`None`: none met, or it ended).
    pub(crate) outage_since: Option<Instant>,
}

tokio::task_local! {
    /// The note of the compound round being polled ([`noting`]); unset outside one.
    static ROUND: std::cell::Cell<RoundNote>;
}

/// Runs `round` with a note of what its tries came to ([`RoundNote`]).
pub(crate) async fn noting<F: std::future::Future>(round: F) -> (F::Output, RoundNote) {
    ROUND
        .scope(std::cell::Cell::new(RoundNote::default()), async move {
            let output = round.await;
            (
                output,
                ROUND.try_with(std::cell::Cell::get).unwrap_or_default(),
            )
        })
        .await
}

/// Whether a compound round is being polled ([`noting`]).
fn in_round() -> bool {
    ROUND.try_with(|_| ()).is_ok()
}

/// Notes, for the compound round being polled (if any), that a try reached Redis (`None`) or
/// met an outage that began at `since`.
fn note(since: Option<Instant>) {
    let _ = ROUND.try_with(|note| {
        let mut seen = note.get();
        match since {
            None => {
                seen.reached = true;
                seen.outage_since = None;
            }
            Some(since) => {
                seen.outage_since = Some(seen.outage_since.map_or(since, |s| s.min(since)))
            }
        }
        note.set(seen);
    });
}

/// The first try of a call with a wait bound `deadline`: cut, if no reply came, one response
/// timeout after the deadline (the longest a round trip may take), so that the call never
/// overruns its wait by more; an unknown outcome is then the caller's to undo (its cleanup
/// runs when the try is dropped), and the call fails with a connection error naming the
/// server. Without a deadline, the try runs as the client's retries take it.
///
/// # Errors
///
/// The try's error, or [`Error::Unreachable`] when it was cut.
pub async fn first_try<T>(
    client: &crate::Client,
    deadline: Option<Instant>,
    fut: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    let Some(deadline) = deadline else {
        return fut.await;
    };
    let patience = client.config().response_timeout();
    match tokio::time::timeout_at(crate::time::later(deadline, patience), fut).await {
        Ok(result) => result,
        Err(_) => Err(no_reply(client, patience)),
    }
}

/// A connection error for a call that got no reply within `within`, naming `client`'s server.
pub fn no_reply(client: &crate::Client, within: Duration) -> Error {
    Error::Unreachable {
        address: client.address().to_owned(),
        source: redis::RedisError::from(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no reply from redis within {within:?}"),
        )),
    }
}

/// A connection error for a wait whose subscriber connection to `client`'s server dropped.
pub(crate) fn connection_lost(client: &crate::Client) -> Error {
    Error::Unreachable {
        address: client.address().to_owned(),
        source: redis::RedisError::from(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "the subscriber connection dropped",
        )),
    }
}

/// What a try made through [`WaitPacer::attempt`] came to.
#[derive(Debug)]
pub enum Paced<T> {
    /// The try reached Redis, which answered `T`: any outage is over.
    Reached(T),
    /// The connection failed: try again after this pause (the outage goes on, within the
    /// client's outage limit).
    Failed(Duration),
}

/// The pace of a wait loop, and its one outage rule, which every waiting call follows (every
/// lock kind, both semaphores, the latch, the rate limiter, MultiLock and RedLock,
/// `wait_unlocked`):
///
/// - **Through an outage, up to the limit.** A try that fails on the connection starts an
///   outage (or continues one); the loop tries again with the retry policy's back-off, never
///   sleeping past the outage's start plus the client's `wait_outage_limit`. A try that
///   reaches Redis ends the outage.
/// - **Then the error.** Once the outage has lasted the limit, the call returns the last
///   connection error ([`Error::Unreachable`]). A try still in flight is cut one retry
///   interval (the policy's longest pause) after the limit, so the error comes within the
///   limit plus one retry interval of the outage's start.
/// - **The wait bound holds.** A try still in flight one response timeout after the call's
///   deadline is cut (its cleanup undoes what it may have done) and the call fails with a
///   connection error; a deadline that passes during an outage ends the call with the
///   connection error, not as a timeout: Redis was not reached, so nothing says the
///   synchronizer was taken.
/// - **Shutdown ends it.** A wait ends with [`Error::Closed`] when the client is shut down
///   (a shutdown wakes every waiter of the client's subscriber connection; a timer's sleep
///   goes through [`pause`](Self::pause)).
#[derive(Debug)]
pub struct WaitPacer<'c> {
    client: &'c crate::Client,
    deadline: Option<Instant>,
    outage_since: Option<Instant>,
    /// The outage's last error (boxed: a waiter keeps the pacer for as long as it waits).
    last_error: Option<Box<Error>>,
    failures: u32,
}

impl<'c> WaitPacer<'c> {
    /// A pacer for a wait of `client` that gives up at `deadline` (`None`: never).
    pub fn new(client: &'c crate::Client, deadline: Option<Instant>) -> Self {
        Self {
            client,
            deadline,
            outage_since: None,
            last_error: None,
            failures: 0,
        }
    }

    /// When the wait gives up (`None`: never).
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// When the outage this wait is in began (`None`: none).
    pub fn outage_since(&self) -> Option<Instant> {
        self.outage_since
    }

    /// Counts an outage that began at `since` as this wait's (another waiter of the same
    /// synchronizer saw it first): the limit runs from then.
    pub fn seed_outage(&mut self, since: Instant) {
        self.outage_since = Some(self.outage_since.map_or(since, |s| s.min(since)));
    }

    /// The retry interval the outage limit allows a try beyond it: the retry policy's
    /// longest pause.
    fn retry_interval(&self) -> Duration {
        self.client.config().retry().backoff.max
    }

    /// Runs one try of the wait, bounded as the outage rule says: cut one retry interval
    /// after the outage limit (counted from this try's start when no outage is on), and one
    /// response timeout after the wait's deadline.
    ///
    /// # Errors
    ///
    /// The try's error when it is not a connection error; a connection error once the outage
    /// has lasted the limit, or when the try was cut.
    pub async fn attempt<T>(
        &mut self,
        fut: impl std::future::Future<Output = Result<T>>,
    ) -> Result<Paced<T>> {
        let config = self.client.config();
        let start = Instant::now();
        let outage_end = crate::time::later(
            self.outage_since.unwrap_or(start),
            config
                .wait_outage_limit()
                .saturating_add(self.retry_interval()),
        );
        let cap = match self.deadline {
            Some(d) => outage_end.min(crate::time::later(d, config.response_timeout())),
            None => outage_end,
        };
        match tokio::time::timeout_at(cap, fut).await {
            Ok(Ok(value)) => {
                self.reached();
                Ok(Paced::Reached(value))
            }
            Ok(Err(e)) => {
                if self.outage_since.is_none() && e.is_connection_error() {
                    self.outage_since = Some(start);
                }
                self.failed(e).map(Paced::Failed)
            }
            Err(_) => {
                note(Some(*self.outage_since.get_or_insert(start)));
                let waited = Instant::now().saturating_duration_since(start);
                Err(self.outage_error(waited))
            }
        }
    }

    /// The wait's first try: its error is the call's, at once, and it is cut one response
    /// timeout after the deadline ([`first_try`]).
    ///
    /// # Errors
    ///
    /// As [`first_try`].
    pub async fn first_attempt<T>(
        &mut self,
        fut: impl std::future::Future<Output = Result<T>>,
    ) -> Result<Paced<T>> {
        // Only a compound round's parts are noted: no clock read on every other first try.
        let start = in_round().then(Instant::now);
        match first_try(self.client, self.deadline, fut).await {
            Ok(value) => {
                if start.is_some() {
                    note(None);
                }
                Ok(Paced::Reached(value))
            }
            Err(e) => {
                if let Some(start) = start.filter(|_| e.is_connection_error()) {
                    note(Some(start));
                }
                Err(e)
            }
        }
    }

    /// Sleeps `pause` before a polled wait's next try (nothing to miss a message on), bounded
    /// as [`next_sleep`](Self::next_sleep) says; `false` once the deadline has passed.
    ///
    /// # Errors
    ///
    /// As [`next_sleep`](Self::next_sleep), and [`Error::Closed`] once the client is shut
    /// down.
    pub async fn rest(&mut self, pause: Duration) -> Result<bool> {
        let Some(pause) = self.next_sleep(pause, true)? else {
            return Ok(false);
        };
        self.pause(tokio::time::sleep(pause)).await?;
        Ok(true)
    }

    /// A try reached Redis: any outage is over.
    pub fn reached(&mut self) {
        note(None);
        self.outage_since = None;
        self.last_error = None;
        self.failures = 0;
    }

    /// A try failed with `e` (made outside [`attempt`](Self::attempt): a compound round):
    /// the back-off before the next try while a connection outage has lasted less than the
    /// client's outage limit.
    ///
    /// # Errors
    ///
    /// `e` itself when it is not a connection error, or when the outage has lasted too long.
    pub fn failed(&mut self, e: Error) -> Result<Duration> {
        if !e.is_connection_error() {
            return Err(e);
        }
        let e = e.naming(self.client.address());
        let since = *self.outage_since.get_or_insert_with(Instant::now);
        note(Some(since));
        if since.elapsed() >= self.client.config().wait_outage_limit() {
            tracing::debug!(error = %e, "redis unreachable for longer than the wait outage limit");
            return Err(e);
        }
        self.failures = self.failures.saturating_add(1);
        tracing::debug!(error = %e, failures = self.failures, "waiting through a redis outage");
        self.last_error = Some(Box::new(e));
        Ok(self.client.config().retry().pause(self.failures))
    }

    /// The error that ends a wait in an outage: the outage's last one, or one saying no reply
    /// came in `waited`.
    fn outage_error(&mut self, waited: Duration) -> Error {
        match self.last_error.take() {
            Some(e) => *e,
            None => no_reply(self.client, waited),
        }
    }

    /// How long to sleep before the next try: `bound`, at most a short re-check while the
    /// subscription is not `confirmed` (a message could be missed), never past the end of the
    /// outage limit (the last try comes then) nor the deadline; `None` once the deadline has
    /// passed.
    ///
    /// # Errors
    ///
    /// The outage's connection error when the deadline or the outage limit has passed during
    /// an outage.
    pub fn next_sleep(&mut self, bound: Duration, confirmed: bool) -> Result<Option<Duration>> {
        let now = Instant::now();
        let mut bound = if confirmed {
            bound
        } else {
            bound.min(UNCONFIRMED_RECHECK)
        };
        if let Some(since) = self.outage_since {
            let limit = self.client.config().wait_outage_limit();
            let end = crate::time::later(since, limit);
            if end <= now && self.failures > 0 {
                return Err(self.outage_error(limit));
            }
            bound = bound.min(end.saturating_duration_since(now));
        }
        match self.deadline {
            Some(deadline) => {
                let remaining = deadline.saturating_duration_since(now);
                if remaining.is_zero() {
                    return match self.outage_since {
                        Some(since) => Err(self.outage_error(now.saturating_duration_since(since))),
                        None => Ok(None),
                    };
                }
                Ok(Some(bound.min(remaining)))
            }
            None => Ok(Some(bound)),
        }
    }

    /// `Ok` unless the client was shut down: a waiter woken on the hub looks here.
    ///
    /// # Errors
    ///
    /// [`Error::Closed`] when the client is shut down.
    pub fn still_open(&self) -> Result<()> {
        if self.client.is_shut_down() {
            Err(crate::client::SHUT_DOWN)
        } else {
            Ok(())
        }
    }

    /// Awaits `sleep` (a timer, any wait off the client's subscriber connection) unless the
    /// client is shut down first.
    ///
    /// # Errors
    ///
    /// [`Error::Closed`] when the client is shut down.
    pub async fn pause<F: std::future::Future>(&self, sleep: F) -> Result<F::Output> {
        tokio::select! {
            biased;
            () = self.client.shut_down() => Err(crate::client::SHUT_DOWN),
            output = sleep => Ok(output),
        }
    }
}
