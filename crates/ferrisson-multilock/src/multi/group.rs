//! MultiLock and RedLock: the handle.

use super::*;

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
    pub(super) group: Arc<Group>,
}

pub(super) fn check(locks: &[Box<dyn AnyLock>], what: &str) -> Result<()> {
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
        F: FnOnce(Hold) -> Fut,
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
        F: FnOnce(Hold) -> Fut,
        Fut: std::future::Future,
    {
        let guard = self.lock_with(options).await?;
        let hold = guard.hold();
        guard.run(work(hold)).await
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
        let gate = gate(&locks);
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
