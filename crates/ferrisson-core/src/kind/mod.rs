//! The engine every lock kind runs on: one acquire (try, wait, give up, settle a lost reply,
//! hand the hold to the watchdog) and one release (its record, resend, local hand-off), written
//! once. A kind plugs in through [`HoldKind`]: its scripts and how to call them, where and how
//! its waiters wait, what a waiter that gives up must undo.

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::metrics::Progress;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::time::Instant;

use crate::client::Client;
use crate::client::ClientEngine;
use crate::config::Backoff;
use crate::error::{Error, Result};
use crate::guard::{CleanupGuard, HoldGuard};
use crate::options::AcquireOptions;
use crate::owner::Owner;
use crate::pubsub::{Need, WakePolicy};
use crate::script::{Script, ScriptCall};
use crate::wait::{Attempt, FirstRound, WaitSpec, register_early, subscribe_confirmed, wait_on};
use crate::watchdog::LeaseSpec;

/// The arguments of one acquire script call ([`HoldKind::try_call`]).
#[derive(Debug, Clone, Copy)]
pub struct TryArgs<'a> {
    /// Who takes the hold.
    pub owner: &'a Owner,
    /// The lease the hold is taken for (the client's lease when the watchdog keeps it).
    pub lease: Duration,
    /// The holds the client believes `owner` has: read by a retry, to tell whether the call
    /// whose reply was lost took a hold (0 on a first call).
    pub believed: u32,
    /// Whether this call retries one whose reply was lost.
    pub retry: bool,
    /// The call's sequence number (the client's, once per call; every resend of the call
    /// carries the same): a resend marks it in the client's undone marks on the lock
    /// ([`LockNames::undone_key`]), and a copy of the call that reaches Redis after that takes
    /// nothing (`late_copy` in `lua/core/marks_prelude.lua`).
    pub seq: u64,
    /// Whether the caller waits when the hold cannot be taken now (and may queue or announce
    /// itself for that).
    pub wait: bool,
    /// The caller's whole wait when it waits (`None`: as long as it takes); a fair lock's
    /// queue arithmetic uses it as Redisson's does.
    pub wait_limit: Option<Duration>,
    /// Whether the caller waits subscribed to the kind's channel already, so that a try that
    /// fails leaves it waiting for a release message (false for the first try of a call,
    /// unless its channel was live: a call subscribes only once that try fails).
    pub subscribed: bool,
    /// How long the caller has waited so far: zero for a first try, and for a kind whose
    /// waiters do not poll ([`Waiting::spin`]), which the engine does not time.
    pub waited: Duration,
    /// `Some` when the caller's last try found a holder whose release publishes nothing
    /// ([`TryReply::Busy::foreign`]) and the client tracks waits: the call is to be
    /// [tracked](crate::__engine::ScriptCall::tracked) with this flag, so that Redis tells the
    /// waiter of the key's next change (and it need not mark that it waits).
    pub track: Option<&'a std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

/// The arguments of one release script call ([`HoldKind::release_call`]).
#[derive(Debug, Clone, Copy)]
pub struct ReleaseArgs<'a> {
    /// Whose hold is released.
    pub owner: &'a Owner,
    /// The lease to set when holds remain and the watchdog keeps them (`None`: leave the TTL).
    pub renew_lease: Option<Duration>,
    /// A local waiter to hand the lock to, with the lease it takes it for (only for kinds that
    /// [hand off](HoldKind::hands_off)).
    pub successor: Option<(&'a Owner, Duration)>,
    /// The release in the client's record on the lock ([`HoldKind::record`]): its slot and
    /// sequence number, the same for its resends, under which the script records what it did
    /// (`None` for a kind without a record).
    pub record: Option<&'a crate::record::RecordedCall>,
    /// Whether this call resends one whose reply was lost (with the same record slot).
    pub retry: bool,
    /// Whether waiters of this client wait on the kind's channel (only looked up for kinds that
    /// [hand off](HoldKind::hands_off)): a release that publishes only when a waiter marked
    /// itself must publish for them, who may not have (they queued behind each other without a
    /// try).
    pub local_waiters: bool,
}

/// The acquire reply of a kind that does not re-enter, when the owner holds the lock already:
/// the engine makes it [`Error::WouldDeadlock`] naming the lock and the owner (Redisson's
/// non-reentrant locks refuse the same way), whatever the kind, with no refusal of its own.
pub const REENTRY_REFUSED: i64 = -2;

/// An acquire reply as the engine reads it ([`HoldKind::read_try`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TryReply {
    /// The hold was taken: the owner's hold count after the call, and the fencing token when
    /// the kind is [fenced](HoldKind::fenced).
    Taken {
        /// The owner's holds after the call (1 for a first hold).
        held: u32,
        /// The fencing token of the hold.
        token: Option<u64>,
    },
    /// Someone else holds it: the holder's remaining lease in ms (negative when it has none or
    /// the script cannot tell).
    Busy {
        /// The holder's remaining lease, ms.
        ttl_ms: i64,
        /// Whether the holder is another client's whose release publishes nothing (another
        /// Redlock client's token on a lean mutex): the waiter's next try arms tracking
        /// ([`TryArgs::track`]).
        foreign: bool,
    },
}

impl TryReply {
    /// The engine scripts' shapes: `held` alone (a positive integer: taken, not fenced),
    /// `{1, held}` or `{1, held, token}` (taken, with the token when `fenced`), `{0, ttl}`
    /// (busy), `{0, ttl, 1}` (busy, held by a holder whose release publishes nothing); `Err`
    /// with the integers of any other integer reply (`None`: not integers), among them [`REENTRY_REFUSED`], which [`read_script_try`] makes an error.
    pub fn read(reply: &redis::Value, fenced: bool) -> std::result::Result<Self, Option<Vec<i64>>> {
        let ints = int_reply(reply).ok_or(None)?;
        let held = |n: i64| u32::try_from(n).ok().filter(|n| *n > 0);
        match ints.as_slice() {
            [n] if !fenced => held(*n).map(|held| TryReply::Taken { held, token: None }),
            [1, n] => held(*n).map(|held| TryReply::Taken { held, token: None }),
            [1, n, token] => held(*n).map(|held| TryReply::Taken {
                held,
                token: fenced.then(|| token_of(*token)),
            }),
            [0, ttl_ms] => Some(TryReply::Busy {
                ttl_ms: *ttl_ms,
                foreign: false,
            }),
            [0, ttl_ms, foreign] => Some(TryReply::Busy {
                ttl_ms: *ttl_ms,
                foreign: *foreign != 0,
            }),
            _ => None,
        }
        .ok_or(Some(ints))
    }
}

/// A release reply as the engine reads it ([`HoldKind::read_release`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseReply {
    /// The owner held nothing (code `-1`).
    NotOwner,
    /// One hold was released and others remain (code `0`).
    StillHeld,
    /// The lock was freed (code `1`), its release message reaching `subscribers` (0 when the
    /// script does not say).
    Freed {
        /// How many subscribers the release message reached.
        subscribers: u64,
    },
    /// The lock went straight to [`ReleaseArgs::successor`] (code `2`), with its fencing token
    /// (0 when not fenced).
    HandedOff {
        /// The successor's fencing token.
        token: u64,
    },
}

impl ReleaseReply {
    /// The engine scripts' shape: a code alone, or `{code, token}` or `{code, token,
    /// subscribers}`, the codes as the variants say; `None` for any other reply.
    pub fn read(reply: &redis::Value) -> Option<Self> {
        let ints = int_reply(reply)?;
        let (code, token, subscribers) = match ints.as_slice() {
            [c] => (*c, 0, 0),
            [c, t] => (*c, *t, 0),
            [c, t, s] => (*c, *t, *s),
            _ => return None,
        };
        Some(match code {
            -1 => ReleaseReply::NotOwner,
            0 => ReleaseReply::StillHeld,
            1 => ReleaseReply::Freed {
                subscribers: u64::try_from(subscribers).unwrap_or(0),
            },
            2 => ReleaseReply::HandedOff {
                token: token_of(token),
            },
            _ => return None,
        })
    }
}

/// Where and how a kind's waiter waits.
#[derive(Debug, Clone)]
pub struct Waiting<'a> {
    /// The channel its wake-ups are published on.
    pub channel: Cow<'a, str>,
    /// Which local waiters a message wakes.
    pub policy: WakePolicy,
    /// The longest sleeps between two tries: `min` after the first try in vain, growing to
    /// `max` (a heartbeat, or a safety net for lost messages and for releases that publish
    /// nothing; [`Backoff::fixed`] for one pause).
    pub recheck: Backoff,
    /// `Some`: the waiter polls instead, with this backoff, and never subscribes (the spin
    /// lock, whose releases publish nothing); `channel` and `policy` are then unused.
    pub spin: Option<Backoff>,
    /// What the waiter waits for, as bits a [`Wake::Matching`](crate::pubsub::Wake::Matching)
    /// message must share to wake it (`u64::MAX`: every release may be for it; a faster
    /// multi-lock's waiter sets the bits of the values it wants).
    pub interest: u64,
}

/// A lock kind, as the engine drives it: the reentrant, spin and fair locks, either side of the
/// read-write lock. The kind's shared state implements it; [`acquire`] and
/// [`release()`](release::release) do the rest, and the kind's guards release through it
/// ([`Release`](crate::guard::Release) is implemented for every `HoldKind`).
///
/// The contract is in the types: a try call's reply is read into a [`TryReply`]
/// ([`read_try`](Self::read_try)), a release call's into a [`ReleaseReply`]
/// ([`read_release`](Self::read_release)), and a release records what it did in the client's
/// record on the lock ([`record`](Self::record), [`ReleaseArgs::record`]).
pub trait HoldKind: Send + Sync + 'static {
    /// The lock's client, key, fencing and record, made in one place.
    fn names(&self) -> &LockNames;

    /// The client the lock runs on.
    fn client(&self) -> &Client {
        &self.names().client
    }

    /// The kind's name in spans and metrics labels (`lock`, `fair_lock`, `read_lock`,
    /// `write_lock`, `spin_lock`).
    fn kind_name(&self) -> &'static str {
        "lock"
    }

    /// The Redis key of the lock.
    fn lock_key(&self) -> &Arc<str> {
        &self.names().key
    }

    /// The watchdog's renewal script for this kind's holds.
    fn renew_script(&self) -> &'static Script;

    /// The field `owner`'s holds are counted under (the watchdog renews it).
    fn hold_field(&self, owner: &Owner) -> Arc<str> {
        owner.as_shared().clone()
    }

    /// Whether acquisitions hand out fencing tokens.
    fn fenced(&self) -> bool {
        self.names().fenced
    }

    /// Where and how `owner` waits.
    fn waiting(&self, owner: &Owner) -> Waiting<'_>;

    /// Whether local waiters queue in arrival order and a releasing holder hands the lock
    /// straight to the first of them ([`ReleaseArgs::successor`]). Such a kind's new callers
    /// queue behind local waiters without a try of their own.
    fn hands_off(&self) -> bool {
        false
    }

    /// One acquire script call.
    fn try_call(&self, args: &TryArgs<'_>) -> ScriptCall;

    /// Reads a [`try_call`](Self::try_call) reply: by default the engine scripts' shapes
    /// ([`TryReply::read`]), and any other integer reply through [`refusal`](Self::refusal).
    ///
    /// # Errors
    ///
    /// The kind's refusal, else [`Error::Protocol`].
    fn read_try(&self, owner: &Owner, reply: &redis::Value) -> Result<TryReply> {
        read_script_try(self, owner, reply)
    }

    /// The error for an acquire reply of no [`TryReply`] shape (`None`: a protocol error).
    fn refusal(&self, owner: &Owner, reply: &[i64]) -> Option<Error> {
        let _ = (owner, reply);
        None
    }

    /// What a waiting call that ends without the hold undoes (leave the queue, withdraw an
    /// intent); nothing by default. Idempotent: it may run for a call that never queued.
    /// `wait_limit`: the call's whole wait, as in [`TryArgs::wait_limit`].
    fn give_up(
        self: Arc<Self>,
        owner: Owner,
        wait_limit: Option<Duration>,
    ) -> BoxFuture<'static, Result<()>> {
        let _ = (owner, wait_limit);
        Box::pin(async { Ok(()) })
    }

    /// The client's record on the lock, where its releases record what they did, so that a
    /// resend after a lost reply counts once (none: a resend reads the outcome from the lock's
    /// own state, as the lean mutex's does).
    fn record(&self) -> Option<&crate::record::CallRecord> {
        self.names().record.as_ref()
    }

    /// One release script call.
    fn release_call(&self, args: &ReleaseArgs<'_>) -> ScriptCall;

    /// Reads a [`release_call`](Self::release_call) reply: by default the engine scripts'
    /// shape ([`ReleaseReply::read`]).
    ///
    /// # Errors
    ///
    /// [`Error::Protocol`] for a reply of no known shape.
    fn read_release(&self, reply: &redis::Value) -> Result<ReleaseReply> {
        ReleaseReply::read(reply).ok_or_else(|| {
            Error::Protocol(format!(
                "the release script of `{}` replied {reply:?}",
                self.lock_key()
            ))
        })
    }

    /// Whether releasing one of several holds kept by the watchdog sets the lease again
    /// ([`ReleaseArgs::renew_lease`]); a read side keeps a lease per hold instead.
    fn renews_on_release(&self) -> bool {
        true
    }
}

/// [`HoldKind::read_try`]'s default, for a kind whose override reads other replies first: the
/// engine scripts' shapes ([`TryReply::read`]), any other integer reply through the kind's
/// [`refusal`](HoldKind::refusal).
///
/// # Errors
///
/// The kind's refusal, else [`Error::Protocol`].
pub fn read_script_try<K: HoldKind + ?Sized>(
    kind: &K,
    owner: &Owner,
    reply: &redis::Value,
) -> Result<TryReply> {
    TryReply::read(reply, kind.fenced()).map_err(|ints| {
        if ints.as_deref() == Some(&[REENTRY_REFUSED]) {
            return Error::WouldDeadlock(format!(
                "lock `{}` is non-reentrant and is already held by {owner}",
                kind.lock_key()
            ));
        }
        ints.and_then(|ints| kind.refusal(owner, &ints))
            .unwrap_or_else(|| {
                Error::Protocol(format!(
                    "the acquire script of `{}` replied {reply:?}",
                    kind.lock_key()
                ))
            })
    })
}

/// Takes a hold of `kind` as `options` say, as `bound` (a fresh owner when `None`): the
/// [`Lock::acquire`](crate::Lock::acquire) of every kind.
///
/// # Errors
///
/// As [`Lock::acquire`](crate::Lock::acquire).
pub fn acquire<'a, K: HoldKind>(
    kind: &'a Arc<K>,
    bound: Option<&Owner>,
    options: AcquireOptions,
) -> impl std::future::Future<Output = Result<Option<HoldGuard>>> + Send + 'a {
    use futures::future::Either;
    // Built here rather than in an `async fn`, which would carry its parameters and the
    // acquisition's future side by side for as long as a waiter waits.
    if let Err(e) = options.validate() {
        return Either::Left(std::future::ready(Err(e)));
    }
    // The bound owner, else a fresh one (see [`Owner`]).
    let owner = bound.cloned().unwrap_or_else(|| kind.client().new_owner());
    let what = crate::drive::Acquisition {
        client: kind.client(),
        kind: kind.kind_name(),
        key: kind.lock_key(),
        owner: Some(&owner),
        permits: None,
        wait: options.wait(),
    };
    // The acquire's body is boxed: the compiler lays out a future awaited inside another one
    // next to the outer future's own state instead of over it, which doubled what a waiter
    // keeps while it waits.
    let taker = owner.clone();
    Either::Right(crate::drive::acquisition(
        what,
        move |progress| async move {
            // A `dyn` future, as `permits::take`'s: the `Send` check of a caller's future
            // stops here.
            let inner: futures::future::BoxFuture<'_, _> =
                Box::pin(acquire_as(kind, taker, options, &progress));
            inner.await
        },
    ))
}

/// [`acquire`] as `owner`, keeping `progress` (tries, and whether it waited for a release).
///
/// A function returning an `async` block rather than an `async fn`: an `async fn` keeps its
/// parameters beside the copies its body makes of them, and what the options say is taken out
/// here, so that a waiter keeps only what its wait uses.
fn acquire_as<'a, K: HoldKind>(
    kind: &'a Arc<K>,
    owner: Owner,
    options: AcquireOptions,
    progress: &'a Progress,
) -> impl std::future::Future<Output = Result<Option<HoldGuard>>> + 'a {
    let lease = options.lease();
    let deadline = options.wait().and_then(crate::time::deadline_after);
    let wait = options.wait();
    let waits = wait != Some(Duration::ZERO);
    async move {
        let client = kind.client();
        // Locals, not captures: what only the first steps use is not kept through the wait.
        let Waiting {
            channel,
            policy,
            recheck,
            spin: polls,
            interest,
        } = kind.waiting(&owner);
        let handoffs = kind.hands_off();
        // What the waiter tells a local releaser, made only once the call waits (the
        // uncontended path never does).
        let need = || handoffs.then(|| Need::hold(owner.clone(), lease));
        // Whether the last try found a holder whose release publishes nothing, and whether
        // the next armed tracking (the wait's net is longer then).
        let tracked = crate::tracking::Tracked::default();
        let mut spec = WaitSpec {
            channel: &channel,
            policy,
            deadline,
            recheck,
            need: None,
            interest,
            armed: Some(&tracked),
        };
        // Whatever ends a waiting call without the hold (a failure, cancellation: in the
        // background) gives up what the kind set up for the wait.
        let give_up = waits.then(|| {
            CleanupGuard::new(client, || {
                let (kind, owner) = (kind.clone(), owner.clone());
                async move {
                    if let Err(e) = kind.clone().give_up(owner.clone(), wait).await {
                        tracing::warn!(
                            key = %kind.lock_key(),
                            %owner,
                            error = %e,
                            "giving up a wait failed; what it left expires by itself"
                        );
                    }
                }
            })
        });
        if let Some(backoff) = polls {
            progress.waited.store(waits, Ordering::Relaxed);
            let outcome =
                Box::pin(spin(kind, &owner, lease, wait, deadline, backoff, progress)).await;
            if let Some(give_up) = give_up {
                give_up.disarm();
            }
            return outcome;
        }
        // Registered before the first try when the channel is subscribed already: a kind that
        // hands off queues behind the local waiters there without a try (no barging, no wasted
        // call: they are woken or handed the lock first, and one leaving unserved wakes the next);
        // another kind makes its first try in the loop, needing no second one after subscribing.
        // (The registration is matched on where it is made: a named binding would keep its
        // storage, beside the subscription's, for the whole wait.)
        let (subscription, first) = match if !waits {
            None
        } else if handoffs {
            client
                .hub()
                .subscribe_if_confirmed(spec.channel, need)
                .map(|s| (s, FirstRound::Sleep))
        } else {
            register_early(client, &spec).map(|s| (s, FirstRound::FirstTry))
        } {
            Some(early) => early,
            None => {
                progress.tried();
                // Boxed, as every try is: a try's future (the script call through the batcher
                // and the connection) is most of the acquire's size, which a waiter would keep
                // for as long as it waits, though it tries only now and then.
                let tried = crate::wait::first_try(
                    client,
                    deadline,
                    Box::pin(try_once(
                        kind,
                        &owner,
                        lease,
                        wait,
                        TryAt {
                            subscribed: false,
                            waited: Duration::ZERO,
                            tracked: Some(&tracked),
                        },
                    )),
                );
                match tried.await? {
                    Attempt::Acquired(guard) => {
                        if let Some(give_up) = give_up {
                            give_up.disarm();
                        }
                        return Ok(Some(guard));
                    }
                    Attempt::Held(_) if !waits => return Ok(None),
                    Attempt::Held(_) => {}
                }
                let subscription = subscribe_confirmed(client, &spec, need()).await;
                // Subscribed first, then tried again: a release between the first try and the
                // subscription cannot be missed.
                (subscription, FirstRound::Try)
            }
        };
        crate::inspect::note_wait(progress, client, wait_for(kind, &owner));
        // The wait checks a hand-off against what the waiter registered with.
        spec.need = need();
        let outcome = wait_on(
            client,
            &subscription,
            &spec,
            first,
            || {
                progress.tried();
                if tracked.foreign() {
                    // Its invalidation wakes this waiter as a release message would.
                    subscription.track(kind.lock_key());
                }
                Box::pin(try_once(
                    kind,
                    &owner,
                    lease,
                    wait,
                    TryAt {
                        subscribed: true,
                        waited: Duration::ZERO,
                        tracked: Some(&tracked),
                    },
                ))
            },
            // What a local releaser handed over: the hold it made for this owner.
            |grant| release::hold_of(kind.clone(), grant.accept()),
        )
        .await?;
        drop(subscription);
        if let Some(give_up) = give_up {
            give_up.disarm();
            if outcome.is_none() {
                // Out of time: give up now, so that the caller is gone when it returns.
                kind.clone().give_up(owner.clone(), wait).await?;
            }
        }
        Ok(outcome)
    }
}

/// What a waiter of `kind` as `owner` waits for, on record (`crate::waits`).
fn wait_for<'a, K: HoldKind>(kind: &'a Arc<K>, owner: &'a Owner) -> crate::waits::WaitFor<'a> {
    crate::waits::WaitFor {
        kind: kind.kind_name(),
        key: kind.lock_key(),
        owner: Some(owner),
        permits: None,
        limit: None,
    }
}

/// The wait of a kind whose waiters poll ([`Waiting::spin`]): tries spaced by `backoff`, never
/// sleeping past the holder's lease (the lock is free by then) or the deadline. The first try's
/// error is the call's; later tries follow the outage rule of every wait (the engine's polled
/// wait, [`poll_wait`](crate::wait::poll_wait)).
async fn spin<K: HoldKind>(
    kind: &Arc<K>,
    owner: &Owner,
    lease: Option<Duration>,
    wait: Option<Duration>,
    deadline: Option<Instant>,
    backoff: Backoff,
    progress: &Progress,
) -> Result<Option<HoldGuard>> {
    use crate::wait::Poll;
    let started = Instant::now();
    crate::wait::poll_wait(kind.client(), deadline, |n| async move {
        progress.tried();
        let waited = if n == 0 {
            Duration::ZERO
        } else {
            if n == 1 {
                // The first try failed: the call waits.
                crate::inspect::note_wait(progress, kind.client(), wait_for(kind, owner));
            }
            started.elapsed()
        };
        let at = TryAt {
            subscribed: false,
            waited,
            tracked: None,
        };
        Ok(match try_once(kind, owner, lease, wait, at).await? {
            Attempt::Acquired(guard) => Poll::Ready(guard),
            Attempt::Held(_) if wait == Some(Duration::ZERO) => Poll::GiveUp,
            // The lock is this waiter's next (a spin lock's reservation), or about to be free:
            // look again at the shortest pause.
            Attempt::Held(0) => Poll::After(backoff.min),
            Attempt::Held(ttl) => {
                let pause = backoff.delay(n);
                Poll::After(match u64::try_from(ttl) {
                    // The holder's lease ends sooner, or the kind asks for an earlier look.
                    Ok(ms) => pause.min(Duration::from_millis(ms)),
                    Err(_) => pause,
                })
            }
        })
    })
    .await
}

/// One acquire script call (settled when its reply is lost). If the caller drops the future
/// while the call may have run, or its outcome stays unknown, the try is undone
/// ([`undo_try_boxed`]): sent once more as a resend, which keeps every copy of it that reaches
/// Redis later from taking anything, and one hold released if a copy took one. A try never sent
/// needs nothing undone.
async fn try_once<K: HoldKind>(
    kind: &Arc<K>,
    owner: &Owner,
    lease: Option<Duration>,
    wait: Option<Duration>,
    at: TryAt<'_>,
) -> Result<Attempt> {
    // The sequence number of the call on its way (0: none yet).
    let sent = std::sync::atomic::AtomicU64::new(0);
    let abandoned = CleanupGuard::new(kind.client(), || {
        // Made (and marked in flight) when the cleanup starts: the owner's next try waits for
        // it.
        let seq = sent.load(std::sync::atomic::Ordering::Relaxed);
        let undone = (seq != 0).then(|| undo_try_boxed(kind, owner, seq));
        let (kind, owner) = (kind.clone(), owner.clone());
        async move {
            if let Some(undone) = undone
                && let Err(e) = undone.await
            {
                tracing::warn!(key = %kind.lock_key(), %owner, error = %e, "undoing an abandoned acquire failed; a hold it took ends with its lease");
            }
        }
    });
    // Boxed: the call's state lives on the heap only while it runs, so a waiter's future stays
    // small for as long as it waits.
    let result = crate::drive::retry_unreplicated(kind.client(), || {
        Box::pin(try_call(kind, owner.clone(), lease, wait, at, &sent))
    })
    .await;
    abandoned.settle(&result);
    result
}

/// The local lease table's entry for the holds of `field` (an owner's hold field) on `kind`'s
/// lock: the holds the client believes it has, and whether the watchdog keeps them. The table
/// changes only when a reply arrives, so a retry or an undo reads the count from before the
/// try it follows.
fn lease_state<K: HoldKind + ?Sized>(
    kind: &K,
    field: &Arc<str>,
) -> Option<crate::watchdog::LeaseState> {
    kind.client()
        .lease_state(kind.renew_script(), kind.lock_key(), field)
}

/// Where a try stands in its caller's wait ([`try_once`]).
#[derive(Clone, Copy)]
struct TryAt<'a> {
    /// The caller waits subscribed to the kind's channel already ([`TryArgs::subscribed`]).
    subscribed: bool,
    /// How long the caller has waited so far ([`TryArgs::waited`]).
    waited: Duration,
    /// The waiter's tracking of a holder whose release publishes nothing.
    tracked: Option<&'a crate::tracking::Tracked>,
}

async fn try_call<K: HoldKind>(
    kind: &Arc<K>,
    owner: Owner,
    lease: Option<Duration>,
    wait: Option<Duration>,
    at: TryAt<'_>,
    sent: &std::sync::atomic::AtomicU64,
) -> Result<Attempt> {
    let TryAt {
        subscribed,
        waited,
        tracked,
    } = at;
    let client = kind.client();
    // A waiter behind a holder whose release publishes nothing arms tracking with its try.
    let track = tracked.and_then(|t| t.next_try(subscribed && client.tracking().available()));
    let field = kind.hold_field(&owner);
    // The holds this owner has locally: the table changes only when a reply arrives, so
    // reading it at a retry gives the count from before the first try.
    let believed = || lease_state(&**kind, &field);
    // Once a hold is kept by the watchdog it stays so until its last release: a shorter fixed
    // lease on re-entry would cut the TTL under the watchdog's feet. (Without a fixed lease
    // there is nothing to look up before the first try.)
    let watched = lease.is_none() || believed().is_some_and(|s| s.renewing);
    let lease = match lease {
        Some(lease) if !watched => lease,
        _ => client.config().lease(),
    };
    // A release of this owner that may still be resent would free what this try takes.
    client.releases_settled(&owner).await;
    let mut sent_at = Instant::now();
    let seq = client.next_seq();
    sent.store(seq, std::sync::atomic::Ordering::Relaxed);
    let reply = client
        .settle(|n| {
            sent_at = Instant::now();
            let call = kind.try_call(&TryArgs {
                owner: &owner,
                lease,
                believed: if n > 0 {
                    believed().map_or(0, |s| s.holds)
                } else {
                    0
                },
                retry: n > 0,
                seq,
                wait: wait != Some(Duration::ZERO),
                wait_limit: wait,
                subscribed,
                waited,
                track,
            });
            async move { client.eval_once_synced(&call).await }
        })
        .await?;
    let (reply, synced): (redis::Value, Result<()>) = reply;
    let (held, token) = match kind.read_try(&owner, &reply)? {
        TryReply::Taken { held, token } => (held, token),
        TryReply::Busy { ttl_ms, foreign } => {
            if let Some(tracked) = tracked {
                tracked.found(foreign);
            }
            return Ok(Attempt::Held(ttl_ms));
        }
    };
    if tracing::enabled!(tracing::Level::DEBUG) {
        let believed = believed().map_or(0, |s| s.holds);
        if held != believed + 1 {
            tracing::debug!(key = %kind.lock_key(), %owner, held, believed, "hold count differs from the local one");
        }
    }
    let handle = client.hold_lease(LeaseSpec {
        script: kind.renew_script(),
        key: kind.lock_key().clone(),
        owner: field,
        lease,
        renew: watched,
        sent_at,
    });
    let guard = HoldGuard::new(kind.clone(), owner, handle, token);
    if let Err(e) = synced {
        // A hold the replicas may not have is not handed out: a failover could give it to
        // someone else.
        if let Err(undo) = crate::replication::without_sync(guard.unlock()).await {
            tracing::warn!(key = %kind.lock_key(), error = %undo, "rolling back a hold the replicas did not acknowledge failed; it ends with its lease");
        }
        return Err(e);
    }
    Ok(Attempt::Acquired(guard))
}

/// A fencing token as the scripts reply it (a counter, never negative).
fn token_of(token: i64) -> u64 {
    u64::try_from(token).unwrap_or(0)
}

/// A script's reply as integers: an integer alone (the lock scripts' hot paths answer so: an
/// integer costs Redis less than a table) or a table of them; `None` for any other shape.
fn int_reply(reply: &redis::Value) -> Option<Vec<i64>> {
    match reply {
        redis::Value::Int(n) => Some(vec![*n]),
        redis::Value::Array(items) => items
            .iter()
            .map(|item| match item {
                redis::Value::Int(n) => Some(*n),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

mod names;
mod release;
pub use names::LockNames;
pub use release::release;
use release::undo_try_boxed;
