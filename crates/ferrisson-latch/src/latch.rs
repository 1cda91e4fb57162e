//! The countdown latch.

use std::sync::Arc;
use std::time::Duration;

use ferrisson_core::__engine::ClientEngine;
use ferrisson_core::__engine::keys::suffixed;
use ferrisson_core::__engine::{
    Acquisition, Attempt, CallRecord, Instant, ScriptCall, WaitSpec, Wake, acquisition, first_try,
    wait_for_turn,
};
use ferrisson_core::{Client, Error, Result};

use crate::scripts::{COUNT_DOWN, DELETE, STATE, TRY_SET};

/// How often a waiter re-checks the count on its own, whatever the messages say: a lost
/// message delays a waiter at most this long.
const RECHECK: Duration = Duration::from_secs(5);

/// How long a completed round is remembered unless the handle says otherwise
/// ([`CountDownLatch::with_completion_memory`]).
pub const DEFAULT_COMPLETION_MEMORY: Duration = Duration::from_secs(3600);

/// What a participant's count-down did ([`CountDownLatch::count_down_once`]).
#[must_use = "a count-down that went nowhere (`NotArmed`) is the caller's to handle"]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CountDown {
    /// This call counted; the count left after it (0: it opened the latch).
    Counted(u64),
    /// The participant had counted in this round already: nothing changed.
    AlreadyCounted,
    /// The latch is open, never armed or already at zero: there was nothing to count down,
    /// and nothing changed. A worker that finishes before its coordinator armed the latch gets
    /// this, and must not assume it was counted.
    NotArmed,
    /// The latch is open because its last round completed (remembered for the completion
    /// memory, [`CountDownLatch::with_completion_memory`]): a worker run again after the
    /// barrier opened is told so, and nothing changed.
    Completed,
}

/// Where a latch stands ([`CountDownLatch::status`]): [`count`](CountDownLatch::count) reads
/// 0 both before a latch is armed and after it opened, and this tells them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LatchStatus {
    /// Armed: this many count-downs are still due.
    Armed(u64),
    /// Open, and its last round completed within the completion memory: a coordinator that
    /// restarts finds its barrier already passed.
    Completed,
    /// Open, with no completed round remembered: never armed, deleted, or its completion
    /// forgotten (or lost with Redis's data).
    Open,
}

impl CountDown {
    /// Whether this call counted ([`Counted`](Self::Counted)).
    pub fn counted(self) -> bool {
        matches!(self, CountDown::Counted(_))
    }
}

/// A countdown latch with Redisson's `RCountDownLatch` semantics and Redis layout.
///
/// - **Open when the count is zero or the latch is missing**: waiting on a latch that was
///   never set returns at once, and counting down a missing latch does nothing (no error), as
///   with Redisson; [`count_down_once`](Self::count_down_once) says so
///   ([`CountDown::NotArmed`]).
/// - **Count each participant once** with [`count_down_once`](Self::count_down_once): a
///   worker that runs twice (a retry, a redelivered message) does not count twice (**\[ext\]**).
/// - **Waits never hang.** Waiters sleep on the client's one subscriber connection and are
///   woken together when the latch opens; they also re-check on reconnect and every few
///   seconds, so a lost message (Redisson's `await()` can hang forever after one) only delays
///   them.
/// - **Rounds are remembered** (**\[ext\]**): when a round completes, the latch remembers it
///   for its completion memory ([`with_completion_memory`](Self::with_completion_memory), an
///   hour by default), so that [`try_set_count`](Self::try_set_count) does not silently arm
///   it again (a coordinator restarted after its barrier opened would wait forever for
///   workers that have finished), [`status`](Self::status) says [`LatchStatus::Completed`],
///   and a worker run again is told ([`CountDown::Completed`]). A new round on purpose is
///   [`try_set_count_new_round`](Self::try_set_count_new_round); a name per run
///   (`import:2026-12-06`) needs none.
/// - **Re-arming is well defined** (**\[ext\]**): waiters of an earlier round are released
///   even if the latch was armed again before they looked; waiters that start after the
///   re-arm wait for the new round.
/// - **Data loss does not open the barrier** (**\[ext\]**): a waiter that saw the latch armed
///   and then finds it gone, with no opening of its round remembered, fails with
///   [`Error::LatchLost`] instead of being released (Redisson would release it: a missing
///   latch reads as open). [`missing_is_open`](Self::missing_is_open) gives Redisson's
///   reading back, for a latch that Redisson clients count down (they leave no completion
///   behind).
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = ferrisson_testkit::RedisServer::spawn();
/// # let client = ferrisson_core::Client::connect(&server.url()).await?;
/// use std::time::Duration;
/// use ferrisson_latch::{CountDown, CountDownLatch};
///
/// let latch = CountDownLatch::new(&client, "batch-42")?;
/// assert!(latch.try_set_count(2).await?);
/// let coordinator = latch.clone();
/// let waiting = tokio::spawn(async move { coordinator.wait_for(Duration::from_secs(5)).await });
/// assert_eq!(latch.count_down_once("worker-a").await?, CountDown::Counted(1));
/// assert_eq!(latch.count_down_once("worker-a").await?, CountDown::AlreadyCounted);
/// assert_eq!(latch.count_down_once("worker-b").await?, CountDown::Counted(0));
/// assert!(waiting.await??, "released");
/// assert_eq!(latch.count().await?, 0);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct CountDownLatch {
    shared: Arc<Shared>,
    /// How long a round this handle completes is remembered.
    memory: Duration,
    /// Whether a missing latch reads as open to this handle's waiters, as Redisson reads it.
    missing_is_open: bool,
}

impl std::fmt::Debug for CountDownLatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CountDownLatch")
            .field("key", &self.shared.key)
            .field("memory", &self.memory)
            .field("missing_is_open", &self.missing_is_open)
            .finish()
    }
}

struct Shared {
    client: Client,
    key: String,
    channel: String,
    round_key: String,
    counted_key: String,
    /// The last round that ended **\[ext\]**: `<round>` completed, `<round>:d` deleted.
    completed_key: String,
    /// The client's record on the latch **\[ext\]**: a count-down resent after a lost reply
    /// counts once, and reports its own result.
    record: CallRecord,
}

impl CountDownLatch {
    /// A handle to the latch named `name` (after the client's namespace prefix).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when `name` is empty; on a Redis Cluster, also when it
    /// carries a hash tag (`{tag}`), because the protocol's latch channel
    /// (`redisson_countdownlatch__channel__{<name>}`) would then land in another slot.
    pub fn new(client: &Client, name: &str) -> Result<Self> {
        let key = client.object_key(name)?;
        // The protocol's latch channel wraps the name in braces whatever it holds, so a name
        // with a hash tag of its own puts the channel in another slot.
        let channel = format!("redisson_countdownlatch__channel__{{{key}}}");
        client.check_same_slot(&key, &[&channel])?;
        Ok(Self {
            shared: Arc::new(Shared {
                client: client.clone(),
                channel,
                round_key: suffixed(&key, "round"),
                counted_key: suffixed(&key, "counted"),
                completed_key: suffixed(&key, "completed"),
                record: CallRecord::new(client, &key),
                key,
            }),
            memory: DEFAULT_COMPLETION_MEMORY,
            missing_is_open: false,
        })
    }

    /// This latch, remembering a round it completes for `memory` instead of an hour: as long
    /// as a coordinator may restart, or a worker run again, and still be told that the round
    /// completed. The handle whose count-down opens the latch sets it, so give every
    /// participant the same.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a memory under one millisecond or beyond what Redis
    /// keeps exact.
    pub fn with_completion_memory(&self, memory: Duration) -> Result<Self> {
        ferrisson_core::duration::validate_lease("completion memory", memory)?;
        Ok(Self {
            memory,
            ..self.clone()
        })
    }

    /// This latch, its waiters reading a latch they find missing as open, as Redisson's do,
    /// instead of failing with [`Error::LatchLost`]: for a latch that Redisson clients count
    /// down (they leave no completion behind), at the price of a barrier that a loss of
    /// Redis's data opens.
    pub fn missing_is_open(&self) -> Self {
        Self {
            missing_is_open: true,
            ..self.clone()
        }
    }

    /// The Redis key of the count.
    pub fn key(&self) -> &str {
        &self.shared.key
    }

    /// Arms the latch with `count` if it is open (zero or missing) and starts a new round;
    /// returns whether it did. It does not when the latch is armed, nor when its last round
    /// completed within the completion memory (**\[ext\]**): a coordinator that restarts after
    /// its barrier opened is not made to wait for workers that have finished.
    /// [`status`](Self::status) tells the two apart;
    /// [`try_set_count_new_round`](Self::try_set_count_new_round) arms a completed latch.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a count of zero (a latch at zero is open), and the errors
    /// of [`count`](Self::count).
    pub async fn try_set_count(&self, count: u32) -> Result<bool> {
        self.try_set(count, "").await
    }

    /// Arms the latch with `count` for a new round if it is open, even when its last round
    /// completed (**\[ext\]**); returns whether it did (not when it is armed). For a latch
    /// reused round after round on purpose.
    ///
    /// # Errors
    ///
    /// As [`try_set_count`](Self::try_set_count).
    pub async fn try_set_count_new_round(&self, count: u32) -> Result<bool> {
        self.try_set(count, "new").await
    }

    async fn try_set(&self, count: u32, mode: &str) -> Result<bool> {
        if count == 0 {
            return Err(Error::InvalidArgument(
                "a latch count must be at least 1 (a latch at zero is open)".into(),
            ));
        }
        let shared = &self.shared;
        let call = ScriptCall::new(
            &TRY_SET,
            &[
                &shared.key,
                &shared.channel,
                &shared.round_key,
                &shared.counted_key,
                &shared.completed_key,
            ],
        )
        .arg(count)
        .arg(shared.client.config().publish_command().as_str())
        .arg(mode);
        // Not retried: a retry after a lost reply would find the latch armed and say no.
        let armed: i64 = shared.client.eval_once(&call).await?;
        if armed == 2 {
            tracing::info!(key = %shared.key, "not armed: its last round completed (try_set_count_new_round arms a new one)");
        }
        Ok(armed == 1)
    }

    /// Where the latch stands: armed with the count-downs still due, open after a completed
    /// round (remembered for the completion memory), or open otherwise.
    ///
    /// # Errors
    ///
    /// As [`count`](Self::count).
    pub async fn status(&self) -> Result<LatchStatus> {
        let state = self.state().await?;
        Ok(if state.count > 0 {
            LatchStatus::Armed(state.count)
        } else if state.completed {
            LatchStatus::Completed
        } else {
            LatchStatus::Open
        })
    }

    /// Counts down once, as Redisson does: at zero the latch opens and every waiter is
    /// released. On an open latch it does nothing.
    ///
    /// Each call counts; for work that may run twice, use
    /// [`count_down_once`](Self::count_down_once).
    ///
    /// # Errors
    ///
    /// As [`count`](Self::count).
    pub async fn count_down(&self) -> Result<()> {
        self.count_down_as("").await.map(|_| ())
    }

    /// Counts down once for `participant`: a participant that already counted in this round
    /// does not count again. Says what happened: [`CountDown::Counted`] with the count left,
    /// [`CountDown::AlreadyCounted`], [`CountDown::Completed`] when the latch is open because
    /// its last round completed (a worker run again after the barrier opened), or
    /// [`CountDown::NotArmed`] when the latch is open otherwise (never armed), so that a worker
    /// that finishes before the coordinator armed the latch learns that its count went
    /// nowhere.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for an empty participant id, and as [`count`](Self::count).
    pub async fn count_down_once(&self, participant: &str) -> Result<CountDown> {
        if participant.is_empty() {
            return Err(Error::InvalidArgument(
                "a participant id must not be empty".into(),
            ));
        }
        self.count_down_as(participant).await
    }

    async fn count_down_as(&self, participant: &str) -> Result<CountDown> {
        let shared = &self.shared;
        let client = &shared.client;
        // Recorded in the client's record on the latch: a resend after a lost reply gets the
        // first call's result, so that a plain count-down never counts twice and a
        // participant's own count is reported as counted.
        let recorded = shared.record.start(client);
        let memory = ferrisson_core::__engine::time::millis(self.memory);
        // Both forms of the call made here, the first and the resend, so that the engine
        // sends them without calling back into this crate.
        let call = |resend: bool| {
            let call = ScriptCall::new(
                &COUNT_DOWN,
                &[
                    &shared.key,
                    &shared.channel,
                    &shared.counted_key,
                    &shared.round_key,
                    &shared.completed_key,
                ],
            )
            .arg(client.config().publish_command().as_str())
            .arg(participant)
            .arg(shared.record.client_hex());
            recorded.form_args(call, client, resend, "").arg(memory)
        };
        let reply: Vec<i64> = recorded.send(client, &call(false), &call(true)).await?;
        match reply.as_slice() {
            [1, count] => Ok(CountDown::Counted(u64::try_from(*count).unwrap_or(0))),
            [0, _] => Ok(CountDown::AlreadyCounted),
            [2, _] => Ok(CountDown::NotArmed),
            [3, _] => Ok(CountDown::Completed),
            other => Err(Error::Protocol(format!(
                "latch/count_down of `{}` replied {other:?}",
                shared.key
            ))),
        }
    }

    /// The remaining count (0 when open or never set).
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] when the key holds something else than a count, [`Error::Redis`].
    pub async fn count(&self) -> Result<u64> {
        Ok(self.state().await?.count)
    }

    async fn state(&self) -> Result<State> {
        let shared = &self.shared;
        let call = ScriptCall::new(
            &STATE,
            &[&shared.key, &shared.round_key, &shared.completed_key],
        );
        let reply: Vec<i64> = shared.client.eval_read(&call).await?;
        match reply.as_slice() {
            [count, round, ended, completed] => Ok(State {
                count: u64::try_from(*count).unwrap_or(0),
                round: *round,
                ended: (*ended >= 0).then_some(*ended),
                completed: *completed == 1,
            }),
            other => Err(Error::Protocol(format!("latch/state replied {other:?}"))),
        }
    }

    /// Whether the round a waiter saw armed (`round`) has ended by the look `now`: the latch
    /// is open or armed for another round, and its ending is remembered (or a missing latch
    /// reads as open to this handle). `Err(LatchLost)` when it is gone without an ending
    /// remembered: Redis lost it.
    fn round_ended(&self, round: i64, now: &State) -> Result<bool> {
        if now.count > 0 && now.round == round {
            return Ok(false);
        }
        if self.missing_is_open || now.ended.is_some_and(|ended| ended >= round) {
            return Ok(true);
        }
        Err(Error::LatchLost(format!(
            "latch `{}` was armed (round {round}) and is now {}, with no opening of that round remembered: Redis lost it (a restart without persistence, FLUSHALL, a failover) or its keys were removed; the barrier did not open, and the count-downs of the round are gone with it. (A latch that Redisson clients count down leaves no opening behind: build the handle with missing_is_open.)",
            self.shared.key,
            if now.count > 0 {
                "armed for another round"
            } else {
                "missing"
            }
        )))
    }

    /// Waits until the latch opens (the round current when the call started ends).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only observes.
    ///
    /// # Errors
    ///
    /// As [`count`](Self::count), once Redis has been unreachable for longer than the
    /// client's outage limit.
    pub async fn wait(&self) -> Result<()> {
        self.wait_until(None).await.map(drop)
    }

    /// Waits up to `timeout` for the latch to open; returns whether it did.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only observes.
    ///
    /// # Errors
    ///
    /// As [`wait`](Self::wait).
    pub async fn wait_for(&self, timeout: Duration) -> Result<bool> {
        self.wait_until(ferrisson_core::__engine::time::deadline_after(timeout))
            .await
    }

    /// Waits through the engine's one wait loop: a look at the count, then (subscribed and
    /// confirmed) a look after every message, every [`RECHECK`] at the latest, through
    /// outages, until the round this call started in ends or `deadline` passes.
    async fn wait_until(&self, deadline: Option<Instant>) -> Result<bool> {
        let wait = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        let what = Acquisition {
            client: &self.shared.client,
            kind: "latch",
            key: &self.shared.key,
            owner: None,
            permits: None,
            wait,
        };
        let opened = acquisition(what, |progress| async move {
            Ok(self
                .wait_until_observed(deadline, &progress)
                .await?
                .then_some(()))
        })
        .await?;
        Ok(opened.is_some())
    }

    /// [`wait_until`](Self::wait_until), its tries and wait noted in `progress`.
    async fn wait_until_observed(
        &self,
        deadline: Option<Instant>,
        progress: &ferrisson_core::metrics::Progress,
    ) -> Result<bool> {
        let shared = &self.shared;
        progress.tried();
        // Boxed, as each later look is (below).
        let first = first_try(&shared.client, deadline, Box::pin(self.state())).await?;
        if first.count == 0 {
            return Ok(true);
        }
        let round = first.round;
        let spec = WaitSpec {
            channel: &shared.channel,
            // Every message (opened, re-armed, deleted) is a reason to look again.
            policy: |_| Wake::All,
            deadline,
            recheck: ferrisson_core::Backoff::fixed(RECHECK),
            need: None,
            interest: u64::MAX,
            armed: None,
        };
        // Subscribed first, then looked again: an opening in between is not missed. Each look
        // is boxed, as the lock kinds' tries are: inline, its future (a read through the
        // connection) would size the wait loop's state for the whole wait.
        // On record while it lasts: `ferrisson waits` shows who waits for the latch.
        ferrisson_core::__engine::note_wait(
            progress,
            &shared.client,
            ferrisson_core::__engine::WaitFor {
                kind: "latch",
                key: &shared.key,
                owner: None,
                permits: None,
                limit: None,
            },
        );
        let opened = wait_for_turn(&shared.client, spec, || {
            progress.tried();
            Box::pin(async {
                let now = self.state().await?;
                // Opened, or a new round began after this call's ended: released. No TTL
                // to go by otherwise: look again after a message, or at the re-check.
                Ok(if self.round_ended(round, &now)? {
                    Attempt::Acquired(())
                } else {
                    Attempt::Held(-1)
                })
            })
        })
        .await?;
        Ok(opened.is_some())
    }
}

/// One look at the latch.
struct State {
    /// The count (0: open).
    count: u64,
    /// The round (0: none, a latch armed by Redisson or open).
    round: i64,
    /// The last round that ended (completed, or the latch deleted), if remembered.
    ended: Option<i64>,
    /// Whether that round completed (rather than was deleted).
    completed: bool,
}

/// The latch's keys: the count, the participants counted this round, the round and the last
/// completed round **\[ext\]** (an expiry covers all four). A delete uses the latch's own
/// script: it deletes them and publishes `1`, and every waiter is released (the deletion is
/// remembered as its round's end).
impl ferrisson_core::__engine::ObjectLayout for CountDownLatch {
    fn object_keys(&self) -> ferrisson_core::__engine::ObjectKeys<'_> {
        let shared = &self.shared;
        ferrisson_core::__engine::ObjectKeys::new(
            &shared.client,
            ferrisson_core::__engine::KeyShape::Count,
            vec![
                &shared.key,
                &shared.counted_key,
                &shared.round_key,
                &shared.completed_key,
            ],
        )
        .waking(&shared.channel, "1")
    }

    /// Deletes the latch, releasing every waiter (a missing latch is open). Returns whether
    /// it existed.
    ///
    /// # Cancel safety
    ///
    /// All or nothing (one script); a dropped call may or may not have deleted it.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] when the key holds something else than a count, [`Error::Redis`].
    async fn delete_object(&self) -> Result<bool> {
        let shared = &self.shared;
        let call = ScriptCall::new(
            &DELETE,
            &[
                &shared.key,
                &shared.channel,
                &shared.counted_key,
                &shared.round_key,
                &shared.completed_key,
            ],
        )
        .arg(shared.client.config().publish_command().as_str())
        .arg(ferrisson_core::__engine::time::millis(self.memory));
        let deleted: i64 = shared.client.eval(&call).await?;
        Ok(deleted == 1)
    }
}
