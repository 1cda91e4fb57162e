//! The wait of an acquisition made of rounds (a MultiLock's or a RedLock's: a round asks every
//! lock): the engine's loop, with the kind's rounds and pauses plugged in ([`Rounds`]).

use std::future::Future;

use tokio::time::Instant;

use crate::error::Result;
use crate::wait::{Paced, WaitPacer};

/// What the pause between two rounds ([`Rounds::between`]) came to.
#[derive(Debug)]
pub enum Between<T> {
    /// Try another round.
    Again,
    /// The wait limit passed: the acquisition ends without.
    TimedOut,
    /// What the acquisition waits for came meanwhile (a local hand-off).
    Ready(T),
}

/// An acquisition made of rounds, as [`wait_rounds`] drives it.
pub trait Rounds: Send {
    /// What a successful round (or a hand-off) gives.
    type Output: Send;

    /// Whether a round after the first is bounded as any try of a wait is
    /// (`WaitPacer::attempt`: cut one retry interval after the outage limit): a round that
    /// asks each lock once. A round whose locks wait (and wait out outages themselves) is
    /// not cut; its connection error is counted when it returns.
    fn paced(&self) -> bool;

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

    /// The pause before round `n`, never past `deadline`.
    fn between(
        &mut self,
        n: u32,
        deadline: Option<Instant>,
    ) -> impl Future<Output = Between<Self::Output>> + Send;
}

/// Runs `rounds` on `client` until one succeeds, a pause gets what it waits for, or the
/// deadline passes (`Ok(None)`); `once`: one round, whatever its outcome. The first round's
/// error is the call's; later ones follow the outage rule of every wait (`WaitPacer`),
/// with the outage shared with the synchronizer's other acquisitions
/// ([`Rounds::shared_outage`]), and a shutdown ends the wait with
/// [`Error::Closed`](crate::Error::Closed).
///
/// # Errors
///
/// As [`wait_for_turn`](crate::wait::wait_for_turn).
pub async fn wait_rounds<R: Rounds>(
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
        let outcome = if n > 0 && rounds.paced() {
            pacer.attempt(rounds.round(n, started, deadline)).await?
        } else {
            match rounds.round(n, started, deadline).await {
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
            }
        };
        n = n.saturating_add(1);
        match outcome {
            Paced::Reached(taken) => {
                rounds.share_outage(None);
                if let Some(taken) = taken {
                    return Ok(Some(taken));
                }
            }
            Paced::Failed(pause) => {
                rounds.share_outage(pacer.outage_since());
                if !pacer.rest(pause).await? {
                    return Ok(None);
                }
                continue;
            }
        }
        if once || deadline.is_some_and(|d| d <= Instant::now()) {
            return Ok(None);
        }
        match pacer.pause(rounds.between(n, deadline)).await? {
            Between::Ready(taken) => return Ok(Some(taken)),
            Between::TimedOut => return Ok(None),
            Between::Again => {}
        }
    }
}
