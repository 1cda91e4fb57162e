//! The one acquire driver: every waiting call of every kind (the lock kinds' and the
//! semaphores' pub/sub waits, the latch's, the spin lock's and the rate limiter's polled ones,
//! MultiLock and RedLock rounds) runs its tries in [`drive`], with the kind's tries and
//! pauses plugged in ([`Rounds`]): the first try and its error, the outage rule of every try
//! after it ([`WaitPacer`]), the pause between tries, the deadline, shutdown.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::Result;
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
    /// connection error counts when it returns, and the first round's error is the call's.
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
        let outcome = match rounds.pace(n) {
            Pace::First => {
                pacer
                    .first_attempt(rounds.round(n, started, deadline))
                    .await?
            }
            Pace::Paced => pacer.attempt(rounds.round(n, started, deadline)).await?,
            Pace::Unpaced => match rounds.round(n, started, deadline).await {
                Ok(taken) => {
                    pacer.reached();
                    Paced::Reached(taken)
                }
                Err(e) if n == 0 => return Err(e),
                Err(e) => {
                    // The outage began no later than the round that found it (a round's lock
                    // may have waited through it already, up to the limit).
                    if e.is_connection_error() {
                        pacer.seed_outage(started);
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
