//! The one acquire driver: every waiting call of every kind (the lock kinds' and the
//! semaphores' pub/sub waits, the latch's, the spin lock's and the rate limiter's polled ones,
//! MultiLock and RedLock rounds) runs its tries in [`drive`], with the kind's tries and
//! pauses plugged in ([`Rounds`]): the first try and its error, the outage rule of every try
//! after it ([`WaitPacer`]), the pause between tries, the deadline, shutdown.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::Result;
use crate::metrics::Progress;
use crate::owner::Owner;
use crate::pacer::{Paced, WaitPacer};

/// What the pause between two rounds ([`Rounds::between`]) came to.
#[derive(Debug)]
pub enum Between<T> {
    /// Try another round.
    Again,
    /// The wait limit passed (or waiting cannot help): the acquisition ends without.
    TimedOut,
    /// What the acquisition waits for came meanwhile (a local hand-off).
    Ready(T),
}

/// How [`drive`] bounds a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// The call's first try: its error is the call's, at once, and it is cut one response
    /// timeout after the deadline (`wait::first_try`).
    First,
    /// A try of the wait: cut as the outage rule says (`WaitPacer::attempt`).
    Paced,
    /// A compound round whose parts wait (and wait out outages) themselves: not cut; its
    /// connection error counts when it returns, from when its parts first met the outage, and
    /// the first round's error is the call's unless a part of it reached Redis.
    Unpaced,
}

/// An acquisition made of rounds (tries), as [`drive`] drives it.
pub trait Rounds: Send {
    /// What a successful round (or a hand-off) gives.
    type Output: Send;

    /// How round `n` is bounded (called right before it): by default the first round is
    /// [`Pace::First`] and every later one [`Pace::Paced`].
    fn pace(&self, n: u32) -> Pace {
        if n == 0 { Pace::First } else { Pace::Paced }
    }

    /// When the outage that other acquisitions of the same synchronizer are in began
    /// (`None`: none known): this one's outage limit counts from then too.
    fn shared_outage(&self) -> Option<Instant> {
        None
    }

    /// Tells the other acquisitions of the same synchronizer when this one's outage began
    /// (`None`: its round reached Redis).
    fn share_outage(&self, since: Option<Instant>) {
        let _ = since;
    }

    /// Round `n` (0 for the first), started at `started`, of a wait that ends at `deadline`:
    /// `Some` when it succeeded, `None` when it did not (what it took is given back).
    fn round(
        &mut self,
        n: u32,
        started: Instant,
        deadline: Option<Instant>,
    ) -> impl Future<Output = Result<Option<Self::Output>>> + Send;

    /// The pause before round `n`: after a round that failed on the connection, `failed` is
    /// the outage's back-off, else the kind's own pause; bounded by `pacer`'s deadline and
    /// outage limit (`WaitPacer::next_sleep`, `WaitPacer::rest`) and ended by a shutdown
    /// (`WaitPacer::pause`, `WaitPacer::still_open`).
    ///
    /// # Errors
    ///
    /// The outage's error when its limit passed, [`Error::Closed`](crate::Error::Closed) once
    /// the client is shut down.
    fn between(
        &mut self,
        n: u32,
        failed: Option<Duration>,
        pacer: &mut WaitPacer<'_>,
    ) -> impl Future<Output = Result<Between<Self::Output>>> + Send;
}

/// Runs `rounds` on `client` until one succeeds, a pause gets what it waits for, or the
/// deadline passes (`Ok(None)`); `once`: one round, whatever its outcome. The first round's
/// error is the call's; later ones follow the outage rule of every wait (`WaitPacer`), with
/// the outage shared with the synchronizer's other acquisitions ([`Rounds::shared_outage`]),
/// and a shutdown ends the wait with [`Error::Closed`](crate::Error::Closed).
///
/// # Errors
///
/// As [`wait_for_turn`](crate::wait::wait_for_turn).
pub async fn drive<R: Rounds>(
    client: &crate::Client,
    deadline: Option<Instant>,
    once: bool,
    mut rounds: R,
) -> Result<Option<R::Output>> {
    let mut pacer = WaitPacer::new(client, deadline);
    let mut n: u32 = 0;
    loop {
        let started = Instant::now();
        if let Some(since) = rounds.shared_outage() {
            pacer.seed_outage(since);
        }
        let pace = rounds.pace(n);
        // Boxed: a round's future (a script call through the connection, in the kind's code)
        // would otherwise size the driver's state, which a waiter keeps for its whole wait,
        // once for each way a round is awaited.
        let round = Box::pin(rounds.round(n, started, deadline));
        let outcome = match pace {
            Pace::First => pacer.first_attempt(round).await?,
            Pace::Paced => pacer.attempt(round).await?,
            Pace::Unpaced => match crate::pacer::noting(round).await {
                (Ok(taken), _) => {
                    pacer.reached();
                    Paced::Reached(taken)
                }
                // A first round that never reached Redis: its error is the call's.
                (Err(e), note) if n == 0 && !(note.reached && e.is_connection_error()) => {
                    return Err(e);
                }
                (Err(e), note) => {
                    // The outage began when the round's tries first met it (a part of the
                    // round may have waited through it already, up to the limit); a part
                    // that no pacer saw fail began no earlier than the round.
                    if e.is_connection_error() {
                        pacer.seed_outage(note.outage_since.unwrap_or(started));
                    }
                    Paced::Failed(pacer.failed(e)?)
                }
            },
        };
        n = n.saturating_add(1);
        let failed = match outcome {
            Paced::Reached(taken) => {
                rounds.share_outage(None);
                if let Some(taken) = taken {
                    return Ok(Some(taken));
                }
                if once || deadline.is_some_and(|d| d <= Instant::now()) {
                    return Ok(None);
                }
                None
            }
            Paced::Failed(pause) => {
                rounds.share_outage(pacer.outage_since());
                Some(pause)
            }
        };
        match rounds.between(n, failed, &mut pacer).await? {
            Between::Ready(taken) => return Ok(Some(taken)),
            Between::TimedOut => return Ok(None),
            Between::Again => {}
        }
    }
}

/// What an acquisition is, for its span and metrics ([`acquisition`]).
#[derive(Debug, Clone, Copy)]
pub struct Acquisition<'a> {
    /// The client it runs on.
    pub client: &'a crate::Client,
    /// The kind's name in spans and metrics labels (`lock`, `semaphore`, `latch`, ...).
    pub kind: &'static str,
    /// The synchronizer's key.
    pub key: &'a str,
    /// Who takes the hold (a lock kind's acquisition).
    pub owner: Option<&'a Owner>,
    /// How many permits it asks for (a semaphore's, a rate limiter's).
    pub permits: Option<u32>,
    /// Its wait limit (`Some(zero)`: one try; `None`: as long as it takes).
    pub wait: Option<Duration>,
}

/// Every acquisition of every kind starts here, and its tries run in [`drive`]: it is work the
/// client's shutdown waits for (new ones get [`Error::Closed`](crate::Error::Closed) once it
/// began), it runs in a `ferrisson.acquire` span (`debug`) with its kind, key, owner, permits
/// and wait limit, and it is counted and timed by kind as an acquisition (`Ok(Some(_))`), a
/// timeout (`Ok(None)` with a wait) or neither. `run` gets the [`Progress`] its tries and
/// waits are noted in.
///
/// A function returning a future rather than an `async fn`: a waiter carries this future for
/// as long as it waits, and an `async fn` would keep its parameters twice over.
pub fn acquisition<T, F, Fut>(
    what: Acquisition<'_>,
    run: F,
) -> impl Future<Output = Result<Option<T>>> + use<T, F, Fut>
where
    F: FnOnce(std::sync::Arc<Progress>) -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    use crate::client::ClientEngine;
    use futures::future::Either;
    // Until it ends, the acquisition is work the client's shutdown waits for.
    let in_flight = match what.client.begin_acquisition() {
        Ok(in_flight) => in_flight,
        Err(e) => return Either::Left(std::future::ready(Err(e))),
    };
    let span = tracing::debug_span!(
        "ferrisson.acquire",
        kind = what.kind,
        key = %what.key,
        owner = what.owner.map(tracing::field::display),
        permits = what.permits,
        wait_ms = what
            .wait
            .map(|w| u64::try_from(w.as_millis()).unwrap_or(u64::MAX)),
        attempts = tracing::field::Empty,
    );
    let name = what.client.metric_name(what.key);
    // With deadlock detection on, a verdict on the acquisition's wait ends it (the
    // acquisition is cancel safe: what its tries took is given back).
    let detects = what.client.config().deadlock_detection().is_some();
    Either::Right(crate::metrics::acquisition(
        span,
        what.kind,
        name,
        what.wait,
        move |progress| {
            let doomed = detects.then(|| progress.clone());
            let run = run(progress);
            let run = async move {
                let _in_flight = in_flight;
                run.await
            };
            match doomed {
                None => Either::Left(run),
                // Boxed: only an acquisition of a client that detects deadlocks carries the
                // race with its verdict; the others keep the size they had.
                Some(progress) => Either::Right(Box::pin(async move {
                    let run = std::pin::pin!(run);
                    let verdict = std::pin::pin!(progress.verdict());
                    match futures::future::select(run, verdict).await {
                        Either::Left((outcome, _)) => outcome,
                        Either::Right((why, _)) => Err(crate::Error::Deadlock(why)),
                    }
                })),
            }
        },
    ))
}

/// Runs `attempt` again while it fails with [`Error::NotReplicated`](crate::Error::NotReplicated) (it rolled back what it
/// took), pausing per the client's retry policy, when the replica sync settings say so.
pub(crate) async fn retry_unreplicated<T, F, Fut>(
    client: &crate::Client,
    mut attempt: F,
) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let retries = match client.config().replica_sync() {
        Some(sync) if sync.retry_acquire() => client.config().retry().retries,
        _ => 0,
    };
    let mut n = 0u32;
    loop {
        match attempt().await {
            Err(crate::Error::NotReplicated { acked, wanted }) if n < retries => {
                n += 1;
                tracing::debug!(
                    acked,
                    wanted,
                    retry = n,
                    "acquire not acknowledged by the replicas: rolled back, trying again"
                );
                tokio::time::sleep(client.config().retry().pause(n)).await;
            }
            other => return other,
        }
    }
}
