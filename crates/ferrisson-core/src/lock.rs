//! The [`Lock`] trait: what every lock kind offers (the reentrant, spin and fair locks, and
//! either side of the read-write lock), written once over the few calls each kind supplies.

use std::future::Future;
use std::time::Duration;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::guard::HoldGuard;
use crate::object::SyncObject;
use crate::options::AcquireOptions;

/// What the engine needs of a lock beyond [`Lock`] (every lock kind's type has it through its
/// handle; users never call it): the watch a RedLock's rounds make between their tries.
pub trait LockWatch {
    /// As [`Lock::wait_unlocked`], but a look that fails on the connection ends the watch at
    /// once with its error instead of waiting the outage out: for a caller that watches
    /// between tries of its own and applies the outage rule to those (a RedLock).
    fn watch_unlocked(&self) -> impl Future<Output = Result<()>> + Send;

    /// The lock as a hold's guard releases through it: what makes a guard of a hold handed
    /// over on it (a RedLock's hand-off, [`HoldLock::adopt`](crate::guard::HoldLock::adopt)).
    fn hold_lock(&self) -> crate::guard::HoldLock;
}

/// A distributed lock of any kind: take it (waiting or not, with a fixed lease or the
/// watchdog), ask about it, force it free.
///
/// A kind supplies [`acquire`](Self::acquire) (one call that takes the lock as the options
/// say, or gives up at the wait limit), [`force_unlock`](Self::force_unlock),
/// [`hold_count`](Self::hold_count) and [`hold_count_of`](Self::hold_count_of); every other
/// method is written here once. How a kind waits (in arrival order, in a FIFO queue across
/// clients, readers together) is in its type docs. Every lock is also a [`SyncObject`]
/// (`exists`, `remaining_ttl`, `expire`, `clear_expire`, `delete` on its keys).
///
/// Bring it into scope to call its methods: `use ferrisson::Lock;` (and
/// `use ferrisson::SyncObject;` for the object calls).
///
/// ```
/// use std::time::Duration;
/// use ferrisson_core::{Lock, AcquireOptions};
///
/// // Any kind will do: generic code takes the trait.
/// async fn run_once<L: Lock>(lock: &L) -> ferrisson_core::Result<bool> {
///     let options = AcquireOptions::new().with_wait(Duration::from_millis(100));
///     match lock.try_lock_with(options).await? {
///         Some(guard) => guard.unlock().await.map(|()| true),
///         None => Ok(false),
///     }
/// }
/// ```
pub trait Lock: SyncObject + LockWatch {
    /// The client the lock runs on.
    fn client(&self) -> &Client;

    /// The Redis key of the lock.
    fn key(&self) -> &str;

    /// The owner this handle acquires and asks as, when it has one of its own (bound with the
    /// kind's `owned_by`); `None`: each acquire takes a fresh owner, so that no two
    /// acquisitions share a hold (see [`Owner`](crate::Owner)).
    fn owner(&self) -> Option<&crate::Owner>;

    /// Takes the lock as `options` say: waiting up to their wait limit (none: as long as it
    /// takes; zero: one try), held for their fixed lease (none: kept by the watchdog).
    /// `Ok(None)`: the wait limit passed. The call every other acquire builds on.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, and nothing leaks: a hold an abandoned call may have taken is released
    /// after it on the same connection, and a waiter that leaves gives up its place at once.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a lease Redis cannot take, [`Error::WrongType`] when the
    /// key holds something else than this kind of lock, [`Error::WouldDeadlock`] for a read
    /// lock's owner asking for the write lock, [`Error::Unreachable`] when Redis cannot be
    /// reached (at the first try, or for longer than the client's outage limit while waiting:
    /// the outage rule of every wait, in [`docs/architecture.md`](https://github.com/ferrisson/ferrisson/blob/main/docs/architecture.md); a wait limit is
    /// then never overrun by more than one response timeout), [`Error::Closed`] once the
    /// client is shut down.
    fn acquire(
        &self,
        options: AcquireOptions,
    ) -> impl Future<Output = Result<Option<HoldGuard>>> + Send;

    /// Releases the lock whoever holds it, waking waiters; returns whether it was locked.
    /// Holders lose their hold: their guards' loss signal fires at the next renewal.
    ///
    /// # Cancel safety
    ///
    /// The release happens or not, as a whole.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`], [`Error::Redis`].
    fn force_unlock(&self) -> impl Future<Output = Result<bool>> + Send;

    /// How many holds the handle's bound owner has (0: none).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a handle with no owner of its own (see
    /// [`Owner`](crate::Owner)), [`Error::WrongType`], [`Error::Redis`].
    fn hold_count(&self) -> impl Future<Output = Result<u32>> + Send;

    /// How many holds `owner` has (0: none), whichever handle it took them through.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`], [`Error::Redis`].
    fn hold_count_of(&self, owner: &crate::Owner) -> impl Future<Output = Result<u32>> + Send;

    /// Whether `owner` holds the lock (Redisson's `isHeldByThread(id)`, with the
    /// [`Owner`](crate::Owner) a guard reports as [`HoldGuard::owner`]).
    ///
    /// ```
    /// use ferrisson_core::{HoldGuard, Lock};
    ///
    /// // Before a step only the holder may take: is the hold still this guard's?
    /// async fn still_ours(lock: &impl Lock, guard: &HoldGuard) -> ferrisson_core::Result<bool> {
    ///     lock.is_held_by(guard.owner()).await
    /// }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// # Errors
    ///
    /// As [`hold_count_of`](Self::hold_count_of).
    fn is_held_by(&self, owner: &crate::Owner) -> impl Future<Output = Result<bool>> + Send {
        let count = self.hold_count_of(owner);
        async move { Ok(count.await? > 0) }
    }

    /// Waits until nobody holds the lock (on a read-write lock's side: until that side is not
    /// held), without taking it: released, forced free, deleted, or its lease ended. Returns
    /// at once when it is not held. For "wait until the job elsewhere is done" code; to run
    /// after it, take the lock instead (another holder may get in first).
    ///
    /// It listens on the lock's release channel where it has one, bounded by the holder's
    /// lease (a lost message delays it, never strands it); on a fair lock, whose releases by
    /// Redisson clients wake the head waiter alone, it also looks again once a second. It
    /// polls with a backoff from 1 ms to 1 s where the releases publish nothing (the spin
    /// lock). A wake-up it takes from a local waiter of the same lock is passed on.
    ///
    /// ```
    /// use std::time::Duration;
    /// use ferrisson_core::Lock;
    ///
    /// // The nightly export runs under this lock on some other machine: wait for it to end.
    /// async fn after_export(lock: &impl Lock) -> ferrisson_core::Result<bool> {
    ///     let done = tokio::time::timeout(Duration::from_secs(3600), lock.wait_unlocked());
    ///     Ok(done.await.is_ok_and(|r| r.is_ok()))
    /// }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only observes (wrap it in `tokio::time::timeout` for a limit).
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`], [`Error::Unreachable`] once Redis has been unreachable for longer than
    /// the client's outage limit.
    fn wait_unlocked(&self) -> impl Future<Output = Result<()>> + Send {
        until_unlocked(self.client(), || look(self), None, None, false)
    }

    /// Takes the lock, waiting as long as it takes; the watchdog keeps the hold.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    fn lock(&self) -> impl Future<Output = Result<HoldGuard>> + Send {
        self.lock_with(AcquireOptions::new())
    }

    /// Takes the lock, runs `work` while it is held, releases it, and returns the work's
    /// output: the scoped form (node-redlock's `using`, redis-py's `with lock:`). The work gets
    /// the [`Hold`](crate::Hold): the fencing token (of a fenced lock or a write lock), a check
    /// for each step and the loss signal. A loss of the hold cuts the work off (it is dropped)
    /// and returns [`Error::LeaseLost`] (see [`HoldGuard::run`]).
    ///
    /// ```
    /// use ferrisson_core::{Lock, Result};
    ///
    /// async fn close_books(lock: &impl Lock) -> Result<u64> {
    ///     // Released when the work is done; cut off with `Error::LeaseLost` if the lock goes.
    ///     lock.with(|hold| async move {
    ///         hold.ensure_held()?; // before each step; `hold.token()` for the writes
    ///         Ok(42) // close the books
    ///     })
    ///     .await?
    /// }
    /// ```
    ///
    /// The loss signal, for a step that must stop in its own way (say, roll back):
    ///
    /// ```
    /// use ferrisson_core::{Lock, Result};
    ///
    /// async fn import(lock: &impl Lock) -> Result<&'static str> {
    ///     lock.with(|hold| async move {
    ///         tokio::select! {
    ///             _reason = hold.lost() => "rolled back", // the lock went: undo, stop
    ///             () = tokio::time::sleep(std::time::Duration::from_millis(10)) => "imported",
    ///         }
    ///     })
    ///     .await
    /// }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire) while it waits; then as [`HoldGuard::run`].
    ///
    /// # Errors
    ///
    /// The errors of [`lock`](Self::lock), and [`Error::LeaseLost`] when the hold was lost
    /// while the work ran.
    fn with<F, Fut>(&self, work: F) -> impl Future<Output = Result<Fut::Output>> + Send
    where
        F: FnOnce(crate::Hold) -> Fut + Send,
        Fut: Future + Send,
        Fut::Output: Send,
    {
        self.with_options(AcquireOptions::new(), work)
    }

    /// As [`with`](Self::with), the lock taken with options (a wait limit: running out of
    /// time is [`Error::Timeout`] and the work does not run; a fixed lease, which the work
    /// must fit in, else it is cut off with [`Error::LeaseLost`]).
    ///
    /// # Cancel safety
    ///
    /// As [`with`](Self::with).
    ///
    /// # Errors
    ///
    /// As [`with`](Self::with), and [`Error::Timeout`].
    fn with_options<F, Fut>(
        &self,
        options: AcquireOptions,
        work: F,
    ) -> impl Future<Output = Result<Fut::Output>> + Send
    where
        F: FnOnce(crate::Hold) -> Fut + Send,
        Fut: Future + Send,
        Fut::Output: Send,
    {
        let taking = self.lock_with(options);
        async move {
            let guard = taking.await?;
            let hold = guard.hold();
            guard.run(work(hold)).await
        }
    }

    /// Takes the lock with options (a wait limit, a fixed lease); running out of time is
    /// [`Error::Timeout`].
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`] when the wait limit passed, and the errors of
    /// [`acquire`](Self::acquire).
    fn lock_with(&self, options: AcquireOptions) -> impl Future<Output = Result<HoldGuard>> + Send {
        use futures::FutureExt;
        // A combinator, not an `async` block: a future made before a block and moved into it
        // is stored twice (as the block's capture and as the awaited value), and a block that
        // makes it inside keeps its captures beside it; a waiter would carry either for as long
        // as it waits.
        let wait = options.wait();
        self.acquire(options).map(move |taken| match taken? {
            Some(guard) => Ok(guard),
            None => Err(Error::Timeout(wait.unwrap_or_default())),
        })
    }

    /// Takes the lock if that is possible right now (one script call); `Ok(None)` otherwise.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    fn try_lock(&self) -> impl Future<Output = Result<Option<HoldGuard>>> + Send {
        self.acquire(AcquireOptions::new().with_wait(Duration::ZERO))
    }

    /// Takes the lock, waiting up to the options' wait limit (none given: one try);
    /// `Ok(None)` when that was not possible in time.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    fn try_lock_with(
        &self,
        options: AcquireOptions,
    ) -> impl Future<Output = Result<Option<HoldGuard>>> + Send {
        let wait = options.wait().unwrap_or(Duration::ZERO);
        self.acquire(options.with_wait(wait))
    }

    /// Whether anyone holds the lock.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] when the key holds someone else's data (a string, a hash that is no
    /// lock of this kind), [`Error::Redis`].
    fn is_locked(&self) -> impl Future<Output = Result<bool>> + Send {
        self.exists()
    }

    /// Whether the handle's bound owner holds the lock.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// # Errors
    ///
    /// As [`hold_count`](Self::hold_count).
    fn is_held_by_current(&self) -> impl Future<Output = Result<bool>> + Send {
        let count = self.hold_count();
        async move { Ok(count.await? > 0) }
    }
}

/// The longest pause between two looks of a watcher ([`Lock::wait_unlocked`]) of a lock whose
/// releases publish nothing (one that publishes is bounded by the holder's lease instead, and
/// by the kind's `LockKind::watch_recheck` when some of its
/// releases do not).
pub const WATCH_RECHECK: Duration = Duration::from_secs(1);

/// A look of a [`Lock`] that is not a lock kind's type: whether it is held, and its TTL.
async fn look<L: Lock + ?Sized>(lock: &L) -> Result<Option<Option<Duration>>> {
    if lock.is_locked().await? {
        Ok(Some(lock.remaining_ttl().await?))
    } else {
        Ok(None)
    }
}

/// [`Lock::wait_unlocked`]: subscribe to `channel` (where the kind publishes every release),
/// `look` (the lock's hold and TTL), sleep until a message, the holder's lease or the
/// `recheck`, and again; through outages as long as the client's outage limit allows
/// (`fail_fast`: not at all, every failed look ends it). Polls with a backoff without a
/// channel. The looks run in the one driver ([`drive`](crate::drive::drive)).
pub(crate) async fn until_unlocked<F, Fut>(
    client: &Client,
    look: F,
    channel: Option<&str>,
    recheck: Option<Duration>,
    fail_fast: bool,
) -> Result<()>
where
    F: Fn() -> Fut + Send + Sync,
    Fut: Future<Output = Result<Option<Option<Duration>>>> + Send,
{
    let watch = Watch {
        client,
        look,
        channel,
        recheck,
        fail_fast,
        subscription: None,
        lease_end: None,
        polls: 0,
    };
    crate::drive::drive(client, None, false, watch)
        .await
        .map(|_| ())
}

/// A watch of a lock until it is free, as the driver drives it ([`until_unlocked`]).
struct Watch<'c, F> {
    client: &'c Client,
    look: F,
    channel: Option<&'c str>,
    recheck: Option<Duration>,
    fail_fast: bool,
    /// This round's subscription to the release channel.
    subscription: Option<crate::pubsub::Subscription>,
    /// When the holder's lease ends, a millisecond after (`None`: no lease).
    lease_end: Option<Duration>,
    /// Polls so far (no channel): the backoff grows with them.
    polls: u32,
}

impl<F, Fut> crate::drive::Rounds for Watch<'_, F>
where
    F: Fn() -> Fut + Send + Sync,
    Fut: Future<Output = Result<Option<Option<Duration>>>> + Send,
{
    type Output = ();

    fn pace(&self, n: u32) -> crate::drive::Pace {
        if n == 0 || self.fail_fast {
            // The first look's error is the call's, at once.
            crate::drive::Pace::First
        } else {
            crate::drive::Pace::Paced
        }
    }

    async fn round(
        &mut self,
        _n: u32,
        _started: tokio::time::Instant,
        _deadline: Option<tokio::time::Instant>,
    ) -> Result<Option<()>> {
        // Subscribed before looking: a release between the look and the sleep wakes it. A new
        // subscription each round puts this watcher behind the lock's real waiters, and the
        // old one, dropped unserved, passes on a wake-up it took from them.
        self.subscription = None;
        self.subscription = self.channel.map(|channel| {
            self.client
                .hub()
                .subscribe(channel, crate::pubsub::lock_message_policy, None)
        });
        Ok(match (self.look)().await? {
            None => Some(()),
            Some(ttl) => {
                // Wake as the lease ends (a millisecond after), at the latest.
                self.lease_end = ttl.map(|t| t.saturating_add(Duration::from_millis(1)));
                None
            }
        })
    }

    async fn between(
        &mut self,
        _n: u32,
        failed: Option<Duration>,
        pacer: &mut crate::wait::WaitPacer<'_>,
    ) -> Result<crate::drive::Between<()>> {
        if let Some(pause) = failed {
            // No deadline: the rest always ends in another look.
            pacer.rest(pause).await?;
            return Ok(crate::drive::Between::Again);
        }
        match &self.subscription {
            Some(subscription) => {
                // A message wakes it; the client's lease bounds a wait whose message was lost.
                let lease = self.client.config().lease();
                let mut bound = self.lease_end.unwrap_or(lease).min(lease);
                if let Some(recheck) = self.recheck {
                    bound = bound.min(recheck);
                }
                let bound = pacer
                    .next_sleep(bound, subscription.is_confirmed())?
                    .unwrap_or(Duration::ZERO);
                subscription.wait(bound).await;
                pacer.still_open()?;
                if self.fail_fast && !subscription.is_confirmed() {
                    // Woken by the subscriber connection dropping: the caller's own tries
                    // find out what happened, at once.
                    return Err(crate::wait::connection_lost(self.client));
                }
            }
            None => {
                let backoff = crate::config::Backoff {
                    min: Duration::from_millis(1),
                    max: WATCH_RECHECK,
                };
                let pause = backoff.delay(self.polls);
                let pause = self.lease_end.map_or(pause, |end| pause.min(end));
                pacer.pause(tokio::time::sleep(pause)).await?;
                self.polls = self.polls.saturating_add(1);
            }
        }
        Ok(crate::drive::Between::Again)
    }
}
