//! MultiLock and RedLock: one acquisition over several locks.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use tokio::time::Instant;

use ferrisson_core::__engine::{Between, ClientEngine, Rounds, no_reply, wait_rounds};
use ferrisson_core::{AcquireOptions, Client, Error, HoldGuard, Lock, LossReason, Result};

/// Any lock kind, behind one object-safe face, so that a [`MultiLock`] can mix kinds (every
/// [`Lock`] is one).
pub trait AnyLock: Send + Sync + 'static {
    /// The Redis key of the lock.
    fn key(&self) -> &str;

    /// The client's lease (how long a watchdog-kept hold lasts without renewal).
    fn client_lease(&self) -> Duration;

    /// The client's response timeout.
    fn response_timeout(&self) -> Duration;

    /// The id of the lock's client: with [`key`](Self::key), which lock on which deployment
    /// (RedLocks over the same instances share their waiting, [`RedLock`]).
    fn client_id(&self) -> &str;

    /// The lock's client.
    fn any_client(&self) -> &Client;

    /// [`Lock::acquire`], boxed.
    fn acquire_any(&self, options: AcquireOptions) -> BoxFuture<'_, Result<Option<HoldGuard>>>;

    /// [`Lock::wait_unlocked`], boxed, ending at the first look that fails on the connection
    /// (the RedLock's rounds wait the outage out).
    fn wait_unlocked_any(&self) -> BoxFuture<'_, Result<()>>;
}

impl<L: Lock + 'static> AnyLock for L {
    fn key(&self) -> &str {
        Lock::key(self)
    }

    fn client_lease(&self) -> Duration {
        self.client().config().lease()
    }

    fn response_timeout(&self) -> Duration {
        self.client().config().response_timeout()
    }

    fn client_id(&self) -> &str {
        self.client().id()
    }

    fn any_client(&self) -> &Client {
        self.client()
    }

    fn acquire_any(&self, options: AcquireOptions) -> BoxFuture<'_, Result<Option<HoldGuard>>> {
        Box::pin(self.acquire(options))
    }

    fn wait_unlocked_any(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(self.watch_unlocked())
    }
}

/// How long one round of an unbounded wait lasts per lock before a MultiLock starts over
/// (Redisson's `baseWaitTime`: 1.5 s per lock).
const ROUND_PER_LOCK: Duration = Duration::from_millis(1_500);

/// The clock drift a RedLock allows for: 1 % of the lease plus 2 ms (the RedLock description's
/// and rslock's rule).
fn drift(lease: Duration) -> Duration {
    lease / 100 + Duration::from_millis(2)
}

struct Group {
    locks: Vec<Box<dyn AnyLock>>,
    /// How many must be held: all of them (MultiLock) or a majority (RedLock).
    quorum: usize,
    red: bool,
    /// A RedLock's turn to wait, shared by every RedLock of this process over the same locks
    /// of the same clients ([`gate`]): of the acquisitions that found the lock held, only the
    /// one holding the permit watches and retries; the others queue for it, first come first
    /// served.
    gate: Option<Arc<Gate>>,
}

/// The span of the random pause of a RedLock waiter woken by a release before its round
/// ([`red_pause`]): wide enough that the rivals the same message woke (one per process) rarely
/// start within one round trip of each other and split the instances.
const WOKEN_SPREAD: Duration = Duration::from_millis(1);

/// How long after freeing a RedLock that other processes wait for a process's fresh
/// acquisitions queue rather than try at once: long enough for the waiters its release woke to
/// hear it, pause ([`WOKEN_SPREAD`]) and send their round.
const YIELD: Duration = Duration::from_millis(3);

/// The most RedLock acquisitions one process hands the lock to in a row before a release
/// frees it for the other processes' waiters (as [`ferrisson_core::__engine::MAX_HANDOFF_STREAK`]
/// for one lock).
const MAX_RED_STREAK: u32 = 8;

/// What the RedLocks of one process over the same locks share: the turn to watch and retry,
/// and the acquisitions waiting, to which an unlock hands the lock straight on.
#[derive(Debug)]
struct Gate {
    /// The turn to watch and retry (one permit).
    turn: tokio::sync::Semaphore,
    /// The acquisitions waiting for a hand-off, oldest first.
    waiting: std::sync::Mutex<std::collections::VecDeque<Waiter>>,
    /// Hand-offs since the lock was last freed for everyone.
    streak: std::sync::atomic::AtomicU32,
    /// The next waiter's number.
    next_id: std::sync::atomic::AtomicU64,
    /// When the outage the waiting turn's rounds are in began (fewer than a quorum of
    /// instances reachable), so that the waiters queued behind the turn count their outage
    /// limit from then too, not from their own first round.
    outage_since: std::sync::Mutex<Option<Instant>>,
    /// Until when this process's fresh acquisitions queue instead of trying at once, after a
    /// release of its that other processes' waiters heard ([`Gate::freed`]).
    yield_until: std::sync::Mutex<Option<Instant>>,
    /// The instance (by index) the turn-holder of this process watches for a release, if it
    /// watches one ([`red_pause`]): a release message it reached there is this process's own.
    watching: std::sync::Mutex<Option<usize>>,
}

/// An acquisition waiting for a hand-off: the lease it asked for, and where its guard goes.
#[derive(Debug)]
struct Waiter {
    id: u64,
    lease: Option<Duration>,
    tx: tokio::sync::oneshot::Sender<MultiGuard>,
}

impl Gate {
    fn new() -> Self {
        Self {
            turn: tokio::sync::Semaphore::new(1),
            waiting: std::sync::Mutex::new(std::collections::VecDeque::new()),
            streak: std::sync::atomic::AtomicU32::new(0),
            next_id: std::sync::atomic::AtomicU64::new(1),
            outage_since: std::sync::Mutex::new(None),
            yield_until: std::sync::Mutex::new(None),
            watching: std::sync::Mutex::new(None),
        }
    }

    fn watching(&self) -> std::sync::MutexGuard<'_, Option<usize>> {
        self.watching
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn outage(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.outage_since
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, std::collections::VecDeque<Waiter>> {
        self.waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues a waiter with `lease`: its place (removed when dropped) and its receiver.
    fn wait(
        self: &Arc<Self>,
        lease: Option<Duration>,
    ) -> (Place, tokio::sync::oneshot::Receiver<MultiGuard>) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.queue().push_back(Waiter { id, lease, tx });
        (
            Place {
                gate: self.clone(),
                id,
            },
            rx,
        )
    }

    /// Whether acquisitions of this process wait (for a hand-off or their turn).
    fn has_waiters(&self) -> bool {
        self.queue().iter().any(|w| !w.tx.is_closed())
    }

    /// Whether this process freed the lock for others a moment ago ([`YIELD`]).
    fn yielding(&self) -> bool {
        self.yield_until
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_some_and(|until| Instant::now() < until)
    }

    /// A release that freed the lock reached, on each instance (by index), that many
    /// subscriber connections: when one reached more than this process's own watcher (on the
    /// instance it watches), other processes wait, and this process's fresh acquisitions let
    /// the ones that message woke go first.
    fn freed(&self, reached: &[(usize, u64)]) {
        let watched = *self.watching();
        let others = reached
            .iter()
            .map(|&(i, n)| n.saturating_sub(u64::from(watched == Some(i))))
            .max()
            .unwrap_or(0);
        if others > 0 {
            *self
                .yield_until
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) =
                Some(ferrisson_core::__engine::time::later(Instant::now(), YIELD));
        }
    }

    /// The oldest waiter still waiting, when the streak allows another hand-off (else the
    /// streak starts over: this release frees the lock for everyone).
    fn next_waiter(&self) -> Option<Waiter> {
        use std::sync::atomic::Ordering;
        let mut queue = self.queue();
        queue.retain(|w| !w.tx.is_closed());
        if queue.is_empty() {
            self.streak.store(0, Ordering::Relaxed);
            return None;
        }
        if self.streak.fetch_add(1, Ordering::Relaxed) >= MAX_RED_STREAK {
            self.streak.store(0, Ordering::Relaxed);
            return None;
        }
        queue.pop_front()
    }
}

/// A waiter's place in its gate's queue: leaving it (dropped) takes the waiter out.
struct Place {
    gate: Arc<Gate>,
    id: u64,
}

impl Drop for Place {
    fn drop(&mut self) {
        self.gate.queue().retain(|w| w.id != self.id);
    }
}

/// Which locks of which clients a RedLock is over: the sorted (client id, key) pairs.
type Identity = Vec<(String, String)>;

/// The waiting turns of one client's RedLocks, by identity.
#[derive(Default)]
struct Gates(std::sync::Mutex<std::collections::HashMap<Identity, std::sync::Weak<Gate>>>);

/// The waiting turn of the RedLocks over `locks` (the same keys of the same clients, in any
/// order), one per process: kept by the client of the first of them in that order (each
/// RedLock over them finds the same one), made on first use, and forgotten once no RedLock
/// uses it.
fn gate(locks: &[Box<dyn AnyLock>]) -> Arc<Gate> {
    let mut identity: Vec<(String, String, usize)> = locks
        .iter()
        .enumerate()
        .map(|(i, l)| (l.client_id().to_owned(), l.key().to_owned(), i))
        .collect();
    identity.sort();
    // `check` made sure there is a lock; without one, a turn of its own.
    let Some(keeper) = identity.first().and_then(|&(_, _, i)| locks.get(i)) else {
        return Arc::new(Gate::new());
    };
    let gates = keeper.any_client().local_state::<Gates>();
    let identity: Identity = identity.into_iter().map(|(c, k, _)| (c, k)).collect();
    let mut gates = gates
        .0
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(gate) = gates.get(&identity).and_then(std::sync::Weak::upgrade) {
        return gate;
    }
    // Forget the gates no RedLock uses any more, every time the table doubles.
    if gates.len() >= 64 && gates.len().is_power_of_two() {
        gates.retain(|_, gate| gate.strong_count() > 0);
    }
    let gate = Arc::new(Gate::new());
    gates.insert(identity, Arc::downgrade(&gate));
    gate
}

impl std::fmt::Debug for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct(if self.red { "RedLock" } else { "MultiLock" })
            .field(
                "keys",
                &self.locks.iter().map(|l| l.key()).collect::<Vec<_>>(),
            )
            .field("quorum", &self.quorum)
            .finish()
    }
}

/// Several locks of any kinds, from any clients, taken and released as one (Redisson's
/// `RedissonMultiLock`).
///
/// - **In order, all or nothing.** The locks are taken one after the other, in the order of
///   their keys. When one cannot be had, every lock taken so far is released and the round
///   starts over after a short random pause, until the wait limit (without one, rounds last
///   1.5 s per lock and go on until one succeeds).
/// - **No deadlock.** Redisson takes the locks in the order given, so two MultiLocks given the
///   same locks in different orders can hold one each and wait each other out until their wait
///   limits. Here every MultiLock takes them in one order (by key), and while it holds some it
///   waits for the next only a little (50 ms, doubling each round up to 1.5 s; the first lock
///   of a round may take all the time left), which also breaks cycles with locks taken
///   outside MultiLocks.
/// - **One lease for all.** A fixed lease applies to every lock, from its own acquisition;
///   without one, each client's watchdog keeps its locks.
/// - **One guard.** [`MultiGuard::unlock`] (or dropping it) releases every lock; its loss signal
///   fires when any of them is lost.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = ferrisson_testkit::RedisServer::spawn();
/// # let client = ferrisson_core::Client::connect(&server.url()).await?;
/// use ferrisson_lock::ReentrantLock;
/// use ferrisson_multilock::MultiLock;
///
/// let both = MultiLock::new(vec![
///     Box::new(ReentrantLock::new(&client, "stock:apples")?),
///     Box::new(ReentrantLock::new(&client, "stock:pears")?),
/// ])?;
/// let guard = both.lock().await?;
/// assert!(both.try_lock().await?.is_none(), "another acquisition waits");
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
///
/// # Cancel safety
///
/// Dropping an acquisition drops the guards it holds (each releases) and the lock call in
/// flight (which gives back what it may have taken): nothing stays held.
pub type MultiLock = LockGroup<false>;

/// A lock over independent Redis primaries that holds once a majority of them does (Redisson's
/// `RedissonRedLock`, the RedLock algorithm): see [`docs/guarantees.md`](https://github.com/ferrisson/ferrisson/blob/main/docs/guarantees.md) for what it adds to one
/// primary and what it does not.
///
/// - **Quorum.** The instances are asked at once, once per round; the lock is held when
///   `n / 2 + 1` granted it. An instance that is down, or slower than its response timeout (at
///   most a quarter of the lease), counts as a refusal. A round that fewer than a quorum of
///   instances could even answer fails with the connection error: the first round's is the
///   call's (a majority down is an outage, not "busy"); later ones are waited out by the
///   outage rule of every wait, up to the client's `wait_outage_limit`. A round short of a quorum releases what
///   it got; the next follows once an instance that refused is seen free (its release
///   message, or its holder's lease running out: no polling) and a short random pause (up to
///   2 ms per round so far, at most 20 ms) that keeps the rivals woken by one release from
///   splitting the instances, until the wait limit: rival RedLocks that split the instances never wait each
///   other out. With no instance to watch (all down) the pause is blind: up to 10 ms per
///   round, at most 200 ms.
/// - **Turns within a process.** Of the acquisitions in one process that wait for the same
///   RedLock (the same locks of the same clients, through any number of `RedLock` values), only
///   the first to find it held watches and retries; the others queue behind it, first come
///   first served, and the next starts when it has the lock (or gives up). A release costs the
///   instances one round of this process's waiters, not one per waiter. A first round is
///   always tried at once, and [`try_lock`](Self::try_lock) never queues.
/// - **Hand-off within a process.** [`MultiGuard::unlock`] hands the lock to the oldest of
///   those waiters: each instance's release passes its hold to it in the same script call, one
///   round trip in all, and the lock never comes free in between. At most 8 in a row; then an
///   unlock frees it, so that other processes' waiters get their turn. Dropping the guard
///   releases without a hand-off.
/// - **Validity.** The guard is valid for the lease less the time spent acquiring and a clock
///   drift allowance (1 % of the lease + 2 ms); when that is not positive, every instance is
///   released and the round counts as failed. [`MultiGuard::valid_until`].
/// - **Release everywhere.** A failed round, and the unlock, release every instance, those
///   that did not grant too (a grant whose reply was lost). The unlock returns once a quorum
///   released, without waiting for an instance that is down (its release goes on in the
///   background), and succeeds for a guard that held its quorum whatever the instances beyond
///   it say; short of a quorum it is [`Error::Unfinished`], naming each instance.
/// - **Renewal.** Without a fixed lease, each instance's client watchdog renews its hold; the
///   guard's loss signal fires once fewer than a quorum are still held.
/// - **Fencing.** Built from fenced locks, the guard's [`token`](MultiGuard::token) is the
///   largest token the quorum granted; see [`docs/guarantees.md`](https://github.com/ferrisson/ferrisson/blob/main/docs/guarantees.md) for what it does and does not
///   guarantee.
///
/// # Cancel safety
///
/// As [`MultiLock`]'s. A dropped acquisition also leaves the hand-off queue, and a lock an
/// unlock handed it meanwhile is released.
pub type RedLock = LockGroup<true>;

/// Several locks taken as one: a [`MultiLock`] (`RED = false`: all of them) or a [`RedLock`]
/// (`RED = true`: a quorum). The acquire calls are one for both; see each for how it takes
/// and holds its locks.
#[derive(Debug, Clone)]
pub struct LockGroup<const RED: bool> {
    group: Arc<Group>,
}

fn check(locks: &[Box<dyn AnyLock>], what: &str) -> Result<()> {
    if locks.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "a {what} needs at least one lock"
        )));
    }
    Ok(())
}

impl<const RED: bool> LockGroup<RED> {
    /// Takes the locks, waiting as long as it takes; the watchdogs keep them.
    ///
    /// # Errors
    ///
    /// A lock's error (a MultiLock: after releasing what it took).
    pub async fn lock(&self) -> Result<MultiGuard> {
        self.lock_with(AcquireOptions::new()).await
    }

    /// Takes the locks with options (a wait limit, a fixed lease for all); running out of
    /// time is [`Error::Timeout`].
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`], [`Error::InvalidArgument`] for bad options, a lock's error.
    pub async fn lock_with(&self, options: AcquireOptions) -> Result<MultiGuard> {
        match acquire(&self.group, options).await? {
            Some(guard) => Ok(guard),
            None => Err(Error::Timeout(options.wait().unwrap_or_default())),
        }
    }

    /// One round, no waiting: `None` when a lock (a RedLock: the quorum) could not be
    /// had at once.
    ///
    /// # Errors
    ///
    /// As [`lock_with`](Self::lock_with).
    pub async fn try_lock(&self) -> Result<Option<MultiGuard>> {
        self.try_lock_with(AcquireOptions::new().with_wait(Duration::ZERO))
            .await
    }

    /// Takes the locks within the options' wait limit (none given: one round, as
    /// [`Lock::try_lock_with`]); `None` when that was not possible in time.
    ///
    /// # Errors
    ///
    /// As [`lock_with`](Self::lock_with).
    pub async fn try_lock_with(&self, options: AcquireOptions) -> Result<Option<MultiGuard>> {
        let wait = options.wait().unwrap_or(Duration::ZERO);
        acquire(&self.group, options.with_wait(wait)).await
    }

    /// Takes the locks, runs `work` while they are held and releases them
    /// ([`MultiGuard::run`]), as [`Lock::with`] does for one lock: the work's output, or
    /// [`Error::LeaseLost`] as soon as the guard is lost (the work is then dropped at its next
    /// await point, and the holds released in the background).
    ///
    /// # Cancel safety
    ///
    /// As [`lock`](Self::lock) while it waits; dropped while the work runs, the guard is
    /// dropped with it and releases in the background.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock), and [`Error::LeaseLost`].
    pub async fn with<F, Fut>(&self, work: F) -> Result<Fut::Output>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future,
    {
        self.with_options(AcquireOptions::new(), work).await
    }

    /// As [`with`](Self::with), the locks taken with options (a wait limit: running out of
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
    pub async fn with_options<F, Fut>(
        &self,
        options: AcquireOptions,
        work: F,
    ) -> Result<Fut::Output>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future,
    {
        self.lock_with(options).await?.run(work()).await
    }

    /// The keys of the locks, in order.
    pub fn keys(&self) -> Vec<&str> {
        self.group.locks.iter().map(|l| l.key()).collect()
    }
}

impl LockGroup<false> {
    /// A MultiLock over `locks`, taken in the order of their keys (locks of the same key, on
    /// different servers, in the order given).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for no locks.
    pub fn new(mut locks: Vec<Box<dyn AnyLock>>) -> Result<Self> {
        check(&locks, "MultiLock")?;
        // One order for every MultiLock: two over the same locks never wait for each other in
        // a cycle (stable: locks of the same key keep the order given).
        locks.sort_by(|a, b| a.key().cmp(b.key()));
        let quorum = locks.len();
        Ok(Self {
            group: Arc::new(Group {
                locks,
                quorum,
                red: false,
                gate: None,
            }),
        })
    }
}

impl LockGroup<true> {
    /// A RedLock over `locks`, one per independent primary (the same name on each, as a rule).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for no locks.
    pub fn new(locks: Vec<Box<dyn AnyLock>>) -> Result<Self> {
        check(&locks, "RedLock")?;
        let quorum = locks.len() / 2 + 1;
        let gate = Some(gate(&locks));
        Ok(Self {
            group: Arc::new(Group {
                locks,
                quorum,
                red: true,
                gate,
            }),
        })
    }

    /// How many instances must grant the lock: `n / 2 + 1`.
    pub fn quorum(&self) -> usize {
        self.group.quorum
    }
}

/// Holds of several locks as one: a [`MultiLock`]'s (all of them) or a [`RedLock`]'s (a
/// quorum). Dropping it releases every hold, in the background: a process about to end calls
/// [`Client::shutdown`] on each client after dropping it, which waits for those releases.
#[derive(Debug)]
pub struct MultiGuard {
    guards: Vec<HoldGuard>,
    /// How many holds must stay for the guard to be held.
    quorum: usize,
    /// Until when a RedLock with a fixed lease is valid; shared with the loss futures, which
    /// follow an [`extend`](MultiGuard::extend).
    valid_until: Validity,
    /// A RedLock's gate, whose waiting acquisitions the unlock hands the lock to.
    gate: Option<Arc<Gate>>,
}

impl MultiGuard {
    /// The holds, in the order of the locks that granted them.
    pub fn holds(&self) -> &[HoldGuard] {
        &self.guards
    }

    /// The largest fencing token among the holds (`None` when no lock is fenced).
    pub fn token(&self) -> Option<u64> {
        self.guards.iter().filter_map(HoldGuard::token).max()
    }

    /// Until when a RedLock taken with a fixed lease is valid (the lease less the time spent
    /// acquiring and the drift allowance); `None` otherwise.
    pub fn valid_until(&self) -> Option<Instant> {
        self.valid_until.get()
    }

    fn lost_count(&self) -> usize {
        self.guards.iter().filter(|g| g.is_lost()).count()
    }

    /// Why the guard is lost (a MultiLock: any hold lost; a RedLock: fewer than a quorum
    /// held, or its validity over), or `None` while it is held.
    pub fn loss_reason(&self) -> Option<LossReason> {
        if self.valid_until.get().is_some_and(|v| v <= Instant::now()) {
            return Some(LossReason::LeaseExpired);
        }
        if self.guards.len() - self.lost_count() < self.quorum {
            return self.guards.iter().find_map(HoldGuard::loss_reason);
        }
        None
    }

    /// `Ok(())` while held; [`Error::LeaseLost`] once lost.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] with the reason.
    pub fn ensure_held(&self) -> Result<()> {
        match self.loss_reason() {
            Some(reason) => Err(Error::LeaseLost(reason)),
            None => Ok(()),
        }
    }

    /// Resolves when the guard is lost, with the reason of the loss that made it so.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only observes.
    pub async fn lost(&self) -> LossReason {
        self.lost_owned().await
    }

    /// As [`lost`](Self::lost), as a future that borrows nothing: for a task of its own (a
    /// callback on loss). It knows nothing of a release: a lease's validity end
    /// ([`valid_until`](Self::valid_until)) resolves it even after one, so stop the task that
    /// runs it when the guard is released.
    pub fn lost_owned(&self) -> impl std::future::Future<Output = LossReason> + Send + 'static {
        let spare = self.guards.len().saturating_sub(self.quorum);
        let mut losses: FuturesUnordered<_> =
            self.guards.iter().map(HoldGuard::lost_owned).collect();
        let expiry = self.valid_until.expired();
        async move {
            tokio::pin!(expiry);
            let mut lost = 0;
            loop {
                tokio::select! {
                    reason = &mut expiry => return reason,
                    next = losses.next() => match next {
                        Some(reason) => {
                            lost += 1;
                            if lost > spare {
                                return reason;
                            }
                        }
                        None => return std::future::pending().await,
                    },
                }
            }
        }
    }

    /// Runs `work` only while the guard holds, as [`HoldGuard::while_held`] does for one hold:
    /// its output, or [`Error::LeaseLost`] as soon as the guard is lost (then `work` is dropped
    /// at its next await point).
    ///
    /// # Cancel safety
    ///
    /// As cancel safe as `work`: it only observes the guard.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] when the guard was lost before or while `work` ran.
    pub async fn while_held<F: std::future::Future>(&self, work: F) -> Result<F::Output> {
        self.ensure_held()?;
        tokio::select! {
            biased;
            reason = self.lost() => Err(Error::LeaseLost(reason)),
            output = work => Ok(output),
        }
    }

    /// Runs `work` while the guard holds ([`while_held`](Self::while_held)), then unlocks,
    /// and returns the work's output, as [`HoldGuard::run`] does for one hold: an unlock that
    /// fails after the work is logged, and the holds end with their lease.
    ///
    /// # Cancel safety
    ///
    /// As cancel safe as `work`: dropping this future drops `work` and the guard, whose holds
    /// are released in the background.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] when the guard was lost before or while `work` ran (its holds are
    /// then released in the background).
    pub async fn run<F: std::future::Future>(self, work: F) -> Result<F::Output> {
        let output = self.while_held(work).await?;
        if let Err(e) = self.unlock().await {
            tracing::warn!(error = %e, "the work ran while held, but the unlock after it failed: the holds end with their lease");
        }
        Ok(output)
    }

    /// Sets the remaining lease of every hold, taken with a fixed lease, to `lease` from now,
    /// as [`HoldGuard::extend`] does for one (redsync's and node-redlock's `extend`). It
    /// succeeds when a quorum (a MultiLock: every lock) extended; a RedLock's
    /// [`valid_until`](Self::valid_until) then moves to `lease` from the call, less the drift
    /// allowance, and the loss signal follows it.
    ///
    /// # Cancel safety
    ///
    /// Dropped while in flight, each extension may or may not have reached its instance:
    /// each hold then counts with the shorter of its old lease and the new one, and the
    /// validity is unchanged.
    ///
    /// # Errors
    ///
    /// - [`Error::LeaseLost`] when the guard was lost before, or is lost after the holds that
    ///   could not be extended;
    /// - [`Error::InvalidArgument`] for a lease under 1 ms or over the maximum, and for holds
    ///   the watchdogs keep (they are renewed already);
    /// - [`Error::Unfinished`] when fewer than a quorum extended while the guard still holds
    ///   (instances unreachable): the old validity stands.
    pub async fn extend(&self, lease: Duration) -> Result<()> {
        if let Some(reason) = self.loss_reason() {
            return Err(Error::LeaseLost(reason));
        }
        let started = Instant::now();
        let outcomes = futures::future::join_all(self.guards.iter().map(|g| g.extend(lease))).await;
        let count = outcomes.len();
        let mut extended = 0;
        let mut failures = Vec::new();
        let mut refused = None;
        for (i, outcome) in outcomes.into_iter().enumerate() {
            match outcome {
                Ok(()) => extended += 1,
                Err(Error::InvalidArgument(why)) => refused = Some(why),
                Err(e) => failures.push(format!("instance {i}: {e}")),
            }
        }
        if extended >= self.quorum {
            if self.valid_until.get().is_some() {
                self.valid_until.set(ferrisson_core::__engine::time::later(
                    started,
                    lease.saturating_sub(drift(lease)),
                ));
            }
            if !failures.is_empty() {
                tracing::info!(extended, quorum = self.quorum, failures = %failures.join("; "), "extended with a quorum");
            }
            return Ok(());
        }
        if let Some(why) = refused {
            return Err(Error::InvalidArgument(why));
        }
        if let Some(reason) = self.loss_reason() {
            return Err(Error::LeaseLost(reason));
        }
        Err(Error::Unfinished(format!(
            "extended on {extended} of {count} instances, fewer than the {} needed ({}); the old validity stands",
            self.quorum,
            failures.join("; ")
        )))
    }

    /// Releases every hold, all at once.
    ///
    /// A RedLock's unlock hands the lock straight to the oldest acquisition of this process
    /// waiting for the same RedLock, when there is one (at most 8 in a row, then the lock is
    /// freed for everyone): each instance's hold goes to the waiter in the release's own
    /// script call, so that the lock passes on in one round trip instead of a release, its
    /// message and a new round. The waiter gets it when a quorum of instances passed it on;
    /// otherwise what passed is released and the waiter goes on waiting, first in line.
    ///
    /// The unlock returns once every release has ended, or a quorum of instances (a
    /// MultiLock: every lock) released and the others had twice as long again (at least
    /// 10 ms), or the slowest instance's response timeout passed: an instance that is down or
    /// frozen is not waited for. Its release goes on in the background (the client's
    /// [`shutdown`](Client::shutdown) waits for it), and what it says is logged.
    ///
    /// # Cancel safety
    ///
    /// Dropped midway, every hold is still released (or passed on) in the background, as
    /// [`HoldGuard::unlock`] does, and a hold passed on to a waiter that never got it is
    /// released.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] when the guard itself was lost (fewer than a quorum held, or its
    /// validity over); [`Error::Unfinished`] when fewer than a quorum of instances (a
    /// MultiLock: not every lock) confirmed the release in time, naming each instance that did
    /// not and why (its hold then ends with its lease). A guard that held its quorum unlocks
    /// with `Ok` however many instances beyond the quorum were down or had lost their hold.
    pub async fn unlock(self) -> Result<()> {
        let lost = self.loss_reason();
        let Self {
            guards,
            quorum,
            gate,
            ..
        } = self;
        let count = guards.len();
        let waiter = gate
            .as_ref()
            .filter(|_| lost.is_none())
            .and_then(|gate| gate.next_waiter());
        // The holds passed on start their leases when their scripts run, after this.
        let started = Instant::now();
        let lease = waiter.as_ref().map(|w| w.lease);
        let ended = end_all(guards, lease, quorum).await;
        let released = ended.released;
        match waiter {
            Some(waiter) => deliver(waiter, ended.passed, quorum, gate, started).await,
            None => {
                if let Some(gate) = &gate {
                    gate.freed(&ended.reached);
                }
            }
        }
        if let Some(reason) = lost {
            if !ended.failures.is_empty() {
                tracing::debug!(failures = %ended.failures.join("; "), "releasing a lost MultiLock/RedLock guard");
            }
            return Err(Error::LeaseLost(reason));
        }
        if released >= quorum {
            if !ended.failures.is_empty() {
                tracing::info!(
                    released,
                    quorum,
                    failures = %ended.failures.join("; "),
                    "unlocked with a quorum; instances that did not release end their holds with their lease"
                );
            }
            return Ok(());
        }
        tracing::warn!(released, quorum, failures = %ended.failures.join("; "), "unlock short of a quorum");
        Err(Error::Unfinished(format!(
            "released on {released} of {count} instances, fewer than the {quorum} needed ({}); the holds left end with their lease",
            ended.failures.join("; ")
        )))
    }
}

/// What [`end_all`] came to.
struct Ended {
    /// Instances that released (or passed their hold on).
    released: usize,
    /// The holds passed on to a waiter.
    passed: Vec<HoldGuard>,
    /// Each instance that did not release in time, and why.
    failures: Vec<String>,
    /// The subscriber connections each instance's release message reached, by index.
    reached: Vec<(usize, u64)>,
}

/// Ends every hold of `guards` at once: released, or (`lease` given: a waiter's) handed on to
/// a fresh owner with that lease. Each release runs in a task of its client's (tracked by its
/// [`shutdown`](Client::shutdown)), so that one not waited for still finishes. Returns once
/// every one ended, or `quorum` of them released and the others had twice as long again (at
/// least 10 ms), or the slowest client's response timeout passed; a release that ends later
/// logs what it says, and a hold passed on then is released.
async fn end_all(guards: Vec<HoldGuard>, lease: Option<Option<Duration>>, quorum: usize) -> Ended {
    let bound = guards
        .iter()
        .map(|g| g.client().config().response_timeout())
        .max()
        .unwrap_or_default();
    let started = Instant::now();
    let mut deadline = ferrisson_core::__engine::time::later(started, bound);
    let mut waiting_for: Vec<String> = guards.iter().map(|g| g.key().to_owned()).collect();
    let mut pending: FuturesUnordered<_> = guards
        .into_iter()
        .enumerate()
        .map(|(i, guard)| end_one(i, guard, lease))
        .collect();
    let mut ended = Ended {
        released: 0,
        passed: Vec::new(),
        failures: Vec::new(),
        reached: Vec::new(),
    };
    let mut reached = false;
    loop {
        let (i, outcome) = match tokio::time::timeout_at(deadline, pending.next()).await {
            Ok(Some(next)) => next,
            Ok(None) => break,
            Err(_) => break,
        };
        let key = waiting_for
            .get_mut(i)
            .map(std::mem::take)
            .unwrap_or_default();
        match outcome {
            Ok((passed, reached)) => {
                ended.released += 1;
                ended.passed.extend(passed);
                ended.reached.push((i, reached));
            }
            Err(e) => ended.failures.push(format!("`{key}`: {e}")),
        }
        if ended.released >= quorum && !reached {
            reached = true;
            // The other instances, if they are up, answer about as fast: they get twice the
            // time the quorum took (at least 10 ms), not the response timeout a frozen or
            // unreachable one would take.
            deadline = deadline.min(ferrisson_core::__engine::time::later(
                Instant::now(),
                started
                    .elapsed()
                    .saturating_mul(2)
                    .max(Duration::from_millis(10)),
            ));
        }
    }
    if !reached {
        for key in waiting_for.iter().filter(|k| !k.is_empty()) {
            ended.failures.push(format!(
                "`{key}`: no answer within {bound:?} (still being released in the background)"
            ));
        }
    }
    ended
}

/// Ends hold `i`, `guard`: released, or handed on with `lease` when given, in a task of its
/// client's. Its outcome comes back unless the caller stopped waiting: then a failure is
/// logged, and a hold passed on is released.
fn end_one(
    i: usize,
    guard: HoldGuard,
    lease: Option<Option<Duration>>,
) -> impl std::future::Future<Output = (usize, Result<(Option<HoldGuard>, u64)>)> {
    let key = guard.key().to_owned();
    let client = guard.client().clone();
    let (tx, rx) = tokio::sync::oneshot::channel::<Result<(Option<HoldGuard>, u64)>>();
    let spawned = client.spawn_cleanup(async move {
        let result = match lease {
            Some(lease) => guard.hand_off(lease).await.map(|passed| (passed, 0)),
            None => guard.unlock_reaching().await.map(|reached| (None, reached)),
        };
        // Not waited for any more: nobody else will hear of it.
        match tx.send(result) {
            Ok(()) | Err(Ok((None, _))) => {}
            Err(Ok((Some(late), _))) => {
                if let Err(e) = late.unlock().await {
                    tracing::debug!(%key, error = %e, "releasing a hold passed on too late");
                }
            }
            Err(Err(e)) => {
                tracing::info!(%key, error = %e, "an instance's release ended after the unlock returned: its hold ends with its lease");
            }
        }
    });
    async move {
        let outcome = if spawned {
            rx.await
                .unwrap_or(Err(Error::Closed("the release task stopped")))
        } else {
            Err(Error::Closed("no Tokio runtime to release on"))
        };
        (i, outcome)
    }
}

/// Gives `waiter` the holds `passed` on to it, as its guard, when they are a quorum (and valid,
/// with a fixed lease); otherwise, or when the waiter has gone meanwhile, releases them. A
/// waiter the hand-off fell short for goes back to the head of the queue, its place kept.
async fn deliver(
    waiter: Waiter,
    passed: Vec<HoldGuard>,
    quorum: usize,
    gate: Option<Arc<Gate>>,
    started: Instant,
) {
    if passed.len() < quorum {
        tracing::debug!(
            passed = passed.len(),
            quorum,
            "a RedLock hand-off reached fewer than a quorum: released"
        );
        if let Some(gate) = &gate {
            gate.queue().push_front(waiter);
        }
        release_all(passed).await;
        return;
    }
    let valid_until = waiter.lease.map(|lease| {
        ferrisson_core::__engine::time::later(started, lease.saturating_sub(drift(lease)))
    });
    let guard = MultiGuard {
        guards: passed,
        quorum,
        valid_until: Validity::new(valid_until),
        gate,
    };
    if let Err(unclaimed) = waiter.tx.send(guard) {
        release_all(unclaimed.guards).await;
    }
}

/// Releases holds taken in a round that failed, all at once.
async fn release_all(guards: Vec<HoldGuard>) {
    let results = futures::future::join_all(guards.into_iter().map(HoldGuard::unlock)).await;
    for result in results {
        if let Err(e) = result {
            tracing::debug!(error = %e, "releasing a hold of a failed round");
        }
    }
}

/// How long a MultiLock holding some of its locks waits for the next one in round `round`:
/// 50 ms, doubling each round, at most 1.5 s.
fn held_wait(round: u32) -> Duration {
    let factor = 1u32.checked_shl(round.min(5)).unwrap_or(32);
    Duration::from_millis(50)
        .saturating_mul(factor)
        .min(ROUND_PER_LOCK)
}

/// A random pause before round `round` starts over, so that colliding MultiLocks drift apart:
/// up to 10 ms per round so far, at most 200 ms.
fn jitter(round: u32) -> Duration {
    random_below(Duration::from_millis(10).saturating_mul(round.min(20)))
}

/// A random duration below `span` (in whole microseconds; zero for a span under 1 µs).
fn random_below(span: Duration) -> Duration {
    let span = span.as_micros().max(1);
    let random = uuid::Uuid::new_v4().as_u128();
    Duration::from_micros(u64::try_from(random % span).unwrap_or(0))
}

async fn acquire(group: &Group, options: AcquireOptions) -> Result<Option<MultiGuard>> {
    options.validate()?;
    let wait = options.wait();
    let once = wait == Some(Duration::ZERO);
    let deadline = wait.and_then(ferrisson_core::__engine::time::deadline_after);
    // The outage rule of every wait, with the first lock's client's settings.
    let Some(client) = group.locks.first().map(|l| l.any_client()) else {
        return Ok(None);
    };
    let _in_flight = client.begin_acquisition()?;
    let acquisition = Acquisition {
        group,
        options,
        once,
        turn: None,
        handoff: None,
        refused: None,
    };
    wait_rounds(client, deadline, once, acquisition).await
}

/// One acquisition's rounds, as the engine's round loop drives them ([`wait_rounds`]).
struct Acquisition<'g> {
    group: &'g Group,
    options: AcquireOptions,
    once: bool,
    /// A RedLock's turn to wait (taken after a first round that failed, kept until it returns).
    turn: Option<tokio::sync::SemaphorePermit<'g>>,
    /// A RedLock waiter's place in the queue for a hand-off, and where the lock comes.
    handoff: Option<(Place, tokio::sync::oneshot::Receiver<MultiGuard>)>,
    /// A RedLock instance that refused the last round because someone holds it: what the
    /// pause before the next round watches.
    refused: Option<usize>,
}

impl Acquisition<'_> {
    /// The gate whose outage this acquisition shares: a RedLock's, while it has the turn (the
    /// waiters queued behind it are in the same outage).
    fn gate_in_turn(&self) -> Option<&Arc<Gate>> {
        self.group.gate.as_ref().filter(|_| self.turn.is_some())
    }
}

impl Rounds for Acquisition<'_> {
    type Output = MultiGuard;

    fn paced(&self) -> bool {
        self.group.red
    }

    fn shared_outage(&self) -> Option<Instant> {
        self.gate_in_turn().and_then(|gate| *gate.outage())
    }

    fn share_outage(&self, since: Option<Instant>) {
        if let Some(gate) = self.gate_in_turn() {
            *gate.outage() = since;
        }
    }

    async fn round(
        &mut self,
        n: u32,
        started: Instant,
        deadline: Option<Instant>,
    ) -> Result<Option<MultiGuard>> {
        let group = self.group;
        self.refused = None;
        if n == 0
            && !self.once
            && group
                .gate
                .as_ref()
                .is_some_and(|g| g.has_waiters() || g.yielding())
        {
            // Acquisitions of this process wait already, or this process has just freed the
            // lock while other processes wait: this one queues behind them without a round (no
            // barging: a round sent at once would beat the waiters the release woke, which
            // pause before theirs, and a process whose tasks take the lock again at once would
            // keep it from every other process). When its turn comes, it watches the first
            // instance as a refused round would have it do.
            self.refused = Some(0);
            return Ok(None);
        }
        let taken = if group.red {
            red_round(group, self.options, &mut self.refused).await?
        } else {
            let round_end = deadline.unwrap_or_else(|| {
                let locks = u32::try_from(group.locks.len()).unwrap_or(u32::MAX);
                ferrisson_core::__engine::time::later(started, ROUND_PER_LOCK.saturating_mul(locks))
            });
            multi_round(group, self.options, self.once, round_end, n).await?
        };
        let Some(guards) = taken else {
            return Ok(None);
        };
        let valid_until = match (group.red, self.options.lease()) {
            (true, Some(lease)) => {
                let valid = lease
                    .saturating_sub(started.elapsed())
                    .saturating_sub(drift(lease));
                if valid.is_zero() {
                    tracing::debug!("the RedLock's validity ran out while acquiring: released");
                    release_all(guards).await;
                    return Ok(None);
                }
                Some(ferrisson_core::__engine::time::later(
                    started,
                    lease.saturating_sub(drift(lease)),
                ))
            }
            _ => None,
        };
        Ok(Some(MultiGuard {
            quorum: group.quorum,
            guards,
            valid_until: Validity::new(valid_until),
            gate: group.gate.clone(),
        }))
    }

    async fn between(&mut self, n: u32, deadline: Option<Instant>) -> Between<MultiGuard> {
        // A RedLock's waiter takes a place in its gate's queue once, kept until it returns:
        // an unlock in this process may hand it the lock ([`MultiGuard::unlock`]).
        if let (Some(gate), None) = (self.group.gate.as_ref(), &self.handoff) {
            self.handoff = Some(gate.wait(self.options.lease()));
        }
        let wait = wait_for_round(self.group, &mut self.turn, self.refused, n, deadline);
        let Some((_, handed)) = self.handoff.as_mut() else {
            return wait.await;
        };
        tokio::select! {
            biased;
            guard = handed => match guard {
                Ok(guard) => Between::Ready(guard),
                // Out of the queue without a hand-off (an unlock that could not put it
                // back): take a new place.
                Err(_) => {
                    self.handoff = None;
                    Between::Again
                }
            },
            step = wait => step,
        }
    }
}

/// The wait before the next round `round` of an acquisition that failed one: a RedLock's
/// acquisition first takes its turn ([`Gate`]), the one who has it watches for a release
/// ([`red_pause`]); a MultiLock's pauses at random ([`jitter`]). Never past `deadline`.
async fn wait_for_round<'g>(
    group: &'g Group,
    turn: &mut Option<tokio::sync::SemaphorePermit<'g>>,
    refused: Option<usize>,
    round: u32,
    deadline: Option<Instant>,
) -> Between<MultiGuard> {
    if let Some(gate) = group.gate.as_ref().filter(|_| turn.is_none()) {
        // Only one acquisition of this process waits for this RedLock at a time: every
        // waiter watching and retrying would send a round to every instance per release
        // per waiter, most of them lost. The others queue here, in order; the one whose
        // turn comes after a wait in the queue starts with a fresh round, whose refusal
        // tells it what to watch.
        match gate.turn.try_acquire() {
            Ok(permit) => *turn = Some(permit),
            Err(tokio::sync::TryAcquireError::NoPermits) => {
                let queued = gate.turn.acquire();
                let permit = match deadline {
                    Some(d) => match tokio::time::timeout_at(d, queued).await {
                        Ok(permit) => permit,
                        Err(_) => return Between::TimedOut,
                    },
                    None => queued.await,
                };
                if let Ok(permit) = permit {
                    *turn = Some(permit);
                    return Between::Again;
                }
            }
            // Never closed; were it, the waiter would wait unqueued.
            Err(tokio::sync::TryAcquireError::Closed) => {}
        }
    }
    let pause = if group.red {
        red_pause(group, refused, round, deadline).await
    } else {
        jitter(round)
    };
    let pause = ferrisson_core::__engine::time::later(Instant::now(), pause);
    match deadline {
        Some(d) => tokio::time::sleep_until(pause.min(d)).await,
        None => tokio::time::sleep_until(pause).await,
    }
    Between::Again
}

/// Between two RedLock rounds: waits until `refused` (an instance that refused because someone
/// held it, by index; one is enough, a holder releases every instance at once, and each watch
/// costs its instance a look and a subscription) is seen free (its release message, or its
/// holder's lease running out: [`Lock::wait_unlocked`], which never polls where releases
/// publish), then answers a short random pause (below [`WOKEN_SPREAD`]) that spreads the
/// rivals the same release woke, so that they do not split the instances between them. When there is nothing to watch (the round failed on instances that are down
/// or slow) or the watch fails, it answers the blind pause of [`jitter`]; it never waits past
/// `deadline`.
async fn red_pause(
    group: &Group,
    refused: Option<usize>,
    round: u32,
    deadline: Option<Instant>,
) -> Duration {
    let freed = async {
        let Some((i, lock)) = refused.and_then(|i| group.locks.get(i).map(|l| (i, l))) else {
            return false;
        };
        let _watching = group.gate.as_deref().map(|gate| Watching::start(gate, i));
        match lock.wait_unlocked_any().await {
            Ok(()) => true,
            Err(e) => {
                tracing::debug!(key = lock.key(), error = %e, "a RedLock instance cannot be watched");
                false
            }
        }
    };
    let freed = match deadline {
        Some(d) => tokio::time::timeout_at(d, freed).await.unwrap_or(false),
        None => freed.await,
    };
    if freed {
        // The same span whatever the round: the turn-holders of other processes, woken by the
        // same message, have the same chance (a span growing with the rounds would favour the
        // youngest waiter, often the releasing process's next one).
        random_below(WOKEN_SPREAD)
    } else {
        jitter(round)
    }
}

/// This process's turn-holder watching instance `i` of its RedLock ([`Gate::freed`]), until
/// dropped.
struct Watching<'g>(&'g Gate);

impl<'g> Watching<'g> {
    fn start(gate: &'g Gate, i: usize) -> Self {
        *gate.watching() = Some(i);
        Self(gate)
    }
}

impl Drop for Watching<'_> {
    fn drop(&mut self) {
        *self.0.watching() = None;
    }
}

/// One MultiLock round: every lock in order, each within the time left. `None`: one could not
/// be had (what was taken is released).
async fn multi_round(
    group: &Group,
    options: AcquireOptions,
    once: bool,
    round_end: Instant,
    round: u32,
) -> Result<Option<Vec<HoldGuard>>> {
    let mut guards = Vec::with_capacity(group.locks.len());
    for lock in &group.locks {
        let left = round_end.saturating_duration_since(Instant::now());
        let wait = if once {
            Duration::ZERO
        } else if guards.is_empty() {
            // Holding nothing, a wait blocks nobody.
            left
        } else {
            // Holding locks, a long wait could deadlock with a MultiLock asking in another
            // order: wait a little (longer each round), then start over.
            left.min(held_wait(round))
        };
        let mut lock_options = AcquireOptions::new().with_wait(wait);
        if let Some(lease) = options.lease() {
            lock_options = lock_options.with_lease(lease);
        }
        match lock.acquire_any(lock_options).await {
            Ok(Some(guard)) => guards.push(guard),
            Ok(None) => {
                release_all(guards).await;
                return Ok(None);
            }
            Err(e) => {
                release_all(guards).await;
                return Err(e);
            }
        }
    }
    Ok(Some(guards))
}

/// One RedLock round: every instance asked once, all at once, each bounded by a share of the
/// lease (at most its response timeout). `None`: fewer than a quorum granted (what was granted
/// is released), and `refused` the first instance that refused because someone holds it.
/// Instances are not waited on: a waiting instance would hold its grant while others wait for
/// theirs, and rival RedLocks splitting the instances between them would wait each other out;
/// a failed round is retried after a pause instead ([`red_pause`]).
async fn red_round(
    group: &Group,
    options: AcquireOptions,
    refused: &mut Option<usize>,
) -> Result<Option<Vec<HoldGuard>>> {
    let attempts = group.locks.iter().enumerate().map(|(i, lock)| {
        let mut lock_options = AcquireOptions::new().with_wait(Duration::ZERO);
        let lease = options.lease().unwrap_or_else(|| lock.client_lease());
        if let Some(lease) = options.lease() {
            lock_options = lock_options.with_lease(lease);
        }
        // A slow instance must not eat the validity.
        let bound = lock.response_timeout().min(lease / 4);
        async move {
            match tokio::time::timeout(bound, lock.acquire_any(lock_options)).await {
                Ok(Ok(Some(guard))) => Instance::Granted(guard),
                Ok(Ok(None)) => Instance::Refused(i),
                Ok(Err(e)) => {
                    tracing::debug!(key = lock.key(), error = %e, "a RedLock instance refused or failed");
                    Instance::Failed(e)
                }
                Err(_) => {
                    tracing::debug!(key = lock.key(), "a RedLock instance did not answer in time");
                    Instance::Failed(no_reply(lock.any_client(), bound))
                }
            }
        }
    });
    let mut granted: Vec<HoldGuard> = Vec::with_capacity(group.locks.len());
    let mut answered = 0usize;
    let mut failure = None;
    // Once the round is decided (a quorum granted, or no quorum possible any more), the
    // instances still out get twice the time the decision took (at least 10 ms), as
    // `end_all` gives them, not their response timeout: one that is down, or frozen, must
    // not hold up every round. Those dropped then undo what they may take (an acquisition's
    // cancel safety), and a hold they would have added is not needed.
    let started = Instant::now();
    let mut pending: FuturesUnordered<_> = attempts.collect();
    let mut grace: Option<Instant> = None;
    loop {
        let next = match grace {
            Some(until) => match tokio::time::timeout_at(until, pending.next()).await {
                Ok(next) => next,
                Err(_) => break,
            },
            None => pending.next().await,
        };
        let Some(outcome) = next else {
            break;
        };
        match outcome {
            Instance::Granted(guard) => {
                answered += 1;
                granted.push(guard);
            }
            Instance::Refused(held) => {
                answered += 1;
                // The first in the instances' order, whatever order they answered in: the
                // watchers of every process watch the same instance.
                *refused = Some(refused.map_or(held, |r| r.min(held)));
            }
            // A connection error weighs more than another failure: it is what the wait's
            // outage rule waits out.
            Instance::Failed(e) => {
                if failure
                    .as_ref()
                    .is_none_or(|f: &Error| !f.is_connection_error() || e.is_connection_error())
                {
                    failure = Some(e);
                }
            }
        }
        if grace.is_none()
            && (granted.len() >= group.quorum || granted.len() + pending.len() < group.quorum)
        {
            grace = Some(ferrisson_core::__engine::time::later(
                Instant::now(),
                started
                    .elapsed()
                    .saturating_mul(2)
                    .max(Duration::from_millis(10)),
            ));
        }
    }
    drop(pending);
    if granted.len() >= group.quorum {
        return Ok(Some(granted));
    }
    release_all(granted).await;
    // Fewer than a quorum could even answer: no round can succeed until they are back.
    match failure {
        Some(e) if answered < group.quorum => Err(e),
        _ => Ok(None),
    }
}

/// What one RedLock instance did in a round.
enum Instance {
    /// Granted: its hold.
    Granted(HoldGuard),
    /// Held by someone else (the instance's index, to watch).
    Refused(usize),
    /// Failed or did not answer in time.
    Failed(Error),
}

/// Until when a RedLock with a fixed lease is valid (`None`: no fixed lease), shared by the
/// guard and its loss futures: an extension moves both, and a loss future asleep on the old
/// validity wakes to the new one (earlier or later).
#[derive(Debug)]
struct Validity(tokio::sync::watch::Sender<Option<Instant>>);

impl Validity {
    fn new(at: Option<Instant>) -> Self {
        Self(tokio::sync::watch::Sender::new(at))
    }

    fn get(&self) -> Option<Instant> {
        *self.0.borrow()
    }

    fn set(&self, at: Instant) {
        self.0.send_replace(Some(at));
    }

    /// Resolves when the validity is over, following extensions; never without one. Once the
    /// guard is gone, the last validity stands.
    fn expired(&self) -> impl std::future::Future<Output = LossReason> + Send + 'static {
        let mut changes = self.0.subscribe();
        async move {
            loop {
                let at = *changes.borrow_and_update();
                let Some(at) = at else {
                    if changes.changed().await.is_err() {
                        return std::future::pending().await;
                    }
                    continue;
                };
                if at <= Instant::now() {
                    return LossReason::LeaseExpired;
                }
                tokio::select! {
                    () = tokio::time::sleep_until(at) => {}
                    changed = changes.changed() => {
                        if changed.is_err() {
                            tokio::time::sleep_until(at).await;
                        }
                    }
                }
            }
        }
    }
}
