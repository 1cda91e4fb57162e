//! The rate limiter.

use std::sync::Arc;
use std::time::Duration;

use ferrisson_core::__engine::keys::suffixed;
use ferrisson_core::__engine::{
    CallRecord, ClientEngine, Instant, Poll, RECORD_PRELUDE, Script, ScriptCall, poll_wait,
    wait_without_lease,
};
use ferrisson_core::{AcquireOptions, Client, Error, Result};

/// The rate limiter's shared functions (`lua/rate_limiter/prelude.lua`).
pub(crate) static PRELUDE: Script =
    Script::new("rate_limiter/prelude", include_str!("../lua/prelude.lua"));
pub(crate) static TRY_ACQUIRE: Script = Script::with_prelude(
    "rate_limiter/try_acquire",
    &PRELUDE,
    include_str!("../lua/try_acquire.lua"),
);
pub(crate) static SET_RATE: Script = Script::with_prelude(
    "rate_limiter/set_rate",
    &PRELUDE,
    include_str!("../lua/set_rate.lua"),
);
pub(crate) static RELEASE: Script = Script::with_two_preludes(
    "rate_limiter/release",
    &PRELUDE,
    &RECORD_PRELUDE,
    include_str!("../lua/release.lua"),
);
pub(crate) static AVAILABLE: Script = Script::with_prelude(
    "rate_limiter/available",
    &PRELUDE,
    include_str!("../lua/available.lua"),
);

/// Whom a rate applies to (Redisson's `RateType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateType {
    /// All clients together share the rate.
    Overall,
    /// Each client has the rate to itself.
    PerClient,
}

impl RateType {
    fn code(self) -> &'static str {
        match self {
            RateType::Overall => "0",
            RateType::PerClient => "1",
        }
    }
}

/// A rate to set ([`RateLimiter::set_rate_with`], [`RateLimiter::try_set_rate_with`],
/// [`RateLimiter::update_rate`]; Redisson's `RateLimiterArgs`): whom it applies to, `rate`
/// permits per `interval`, a keep-alive, and whether the window's state is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateArgs {
    kind: RateType,
    rate: u64,
    interval: Duration,
    keep_alive: Duration,
    keep_state: bool,
}

impl RateArgs {
    /// `rate` permits per `interval` for `kind`, no keep-alive, the window started afresh.
    pub fn new(kind: RateType, rate: u64, interval: Duration) -> Self {
        Self {
            kind,
            rate,
            interval,
            keep_alive: Duration::ZERO,
            keep_state: false,
        }
    }

    /// A keep-alive (zero: none, the default): every acquire and release makes the limiter's
    /// keys live this long again, so that a limiter nobody uses goes away by itself (Redisson's
    /// `keepAliveTime`). It must be at least the interval: a permit outlives no key.
    pub fn keep_alive(mut self, keep_alive: Duration) -> Self {
        self.keep_alive = keep_alive;
        self
    }

    /// Whether a set or update keeps the window's state (Redisson's `keepState`): the permits
    /// given in the last interval stay given, and the permits left are the new rate less
    /// them. Without (the default), the window starts afresh. A changed [`RateType`] always
    /// starts afresh.
    pub fn keep_state(mut self, keep_state: bool) -> Self {
        self.keep_state = keep_state;
        self
    }
}

/// `rate` permits per `interval`, in a sliding window, for all clients or for each (Redisson's
/// `RRateLimiter`, on its Redis layout: the hash `name` with `rate`, `interval` and `type`,
/// `{name}:value` and `{name}:permits`, with `:<client id>` for per-client rates).
///
/// - **A sliding window.** A permit taken at time *t* is back at *t* + `interval`: at any
///   moment, the permits taken in the last `interval` never exceed `rate`.
/// - **Waits that do not poll blindly.** A call that finds too few permits is told by the
///   script when the oldest permit of the window returns, and sleeps exactly that long.
/// - **The server's clock.** Times are the server's, so clients with skewed clocks share one
///   window (Redisson passes each client's own time).
/// - **Bad input is an error.** More permits than the rate ever gives, a rate of zero, an
///   interval below a millisecond: [`Error::InvalidArgument`]. A limiter whose rate was never
///   set (or was lost with Redis data): [`Error::NotSetUp`]. Zero permits: granted at once.
/// - **Retries count once.** A call retried after a lost reply finds the permits it took; a
///   release resent after a lost reply gives them back once.
/// - **A keep-alive** ([`RateArgs::keep_alive`]) lets a limiter nobody uses expire: each
///   acquire and release makes its keys live that long again, as Redisson's do.
/// - **Giving permits back** ([`release`](Self::release)): a call that took permits and did
///   not use them returns them to the window, as Redisson's `release` does.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = ferrisson_testkit::RedisServer::spawn();
/// # let client = ferrisson_core::Client::connect(&server.url()).await?;
/// use std::time::Duration;
/// use ferrisson_rate_limiter::{RateLimiter, RateType};
///
/// let limiter = RateLimiter::new(&client, "sms")?;
/// assert!(limiter.try_set_rate(RateType::Overall, 2, Duration::from_millis(200)).await?);
/// assert!(limiter.try_acquire(2).await?);
/// assert!(!limiter.try_acquire(1).await?, "the window is spent");
/// limiter.acquire(1).await?; // sleeps until the window gives a permit back
/// # Ok(()) }
/// ```
///
/// # Cancel safety
///
/// A dropped acquire takes no permit after it is dropped; one whose script ran before the
/// drop has taken its permits, which return with the window as every permit does.
#[derive(Clone)]
pub struct RateLimiter {
    shared: Arc<Shared>,
    /// The rate this handle sets again when it finds none ([`with_rate`](Self::with_rate)).
    rate: Option<RateArgs>,
}

struct Shared {
    client: Client,
    key: String,
    value: String,
    client_value: String,
    permits: String,
    client_permits: String,
    /// The client's record on the limiter: a release resent after a lost reply counts once.
    record: CallRecord,
}

impl std::fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimiter")
            .field("key", &self.shared.key)
            .field("rate", &self.rate)
            .finish_non_exhaustive()
    }
}

/// The longest interval a rate may have (Redis scores keep milliseconds exact below 2^53).
const MAX_INTERVAL_MS: u64 = 1 << 50;

/// The largest rate: the scripts count permits in Lua numbers (doubles) and Redis integers,
/// exact up to 2^53 - 1.
const MAX_RATE: u64 = (1 << 53) - 1;

impl RateLimiter {
    /// A handle to the rate limiter named `name` (after the client's namespace prefix).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when `name` is empty.
    pub fn new(client: &Client, name: &str) -> Result<Self> {
        let key = client.object_key(name)?;
        let value = suffixed(&key, "value");
        let permits = suffixed(&key, "permits");
        Ok(Self {
            shared: Arc::new(Shared {
                client: client.clone(),
                client_value: format!("{value}:{}", client.id()),
                client_permits: format!("{permits}:{}", client.id()),
                record: CallRecord::new(client, &key),
                value,
                permits,
                key,
            }),
            rate: None,
        })
    }

    /// This limiter with a configured rate, which heals it: when a call finds no rate (never
    /// set, expired with its keep-alive, or lost with Redis data: a restart without
    /// persistence, `FLUSHALL`, a failover), it sets `args` (only if still none is set, so a
    /// rate another process set stands) and goes on, instead of failing with
    /// [`Error::NotSetUp`]. The semaphores' [`with_limit`] for rates: build every process's
    /// limiter this way, and a limit survives Redis losing its data.
    ///
    /// Nothing is sent here; the rate is set at the first call that needs it.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = ferrisson_testkit::RedisServer::spawn();
    /// # let client = ferrisson_core::Client::connect(&server.url()).await?;
    /// use std::time::Duration;
    /// use ferrisson_rate_limiter::{RateArgs, RateLimiter, RateType};
    ///
    /// let limiter = RateLimiter::new(&client, "partner-api")?
    ///     .with_rate(RateArgs::new(RateType::Overall, 5, Duration::from_secs(1)))?;
    /// limiter.acquire(1).await?; // sets the rate if it is missing, then takes a permit
    /// # Ok(()) }
    /// ```
    ///
    /// [`with_limit`]: https://docs.rs/ferrisson-semaphore/latest/ferrisson_semaphore/struct.Semaphore.html#method.with_limit
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for arguments [`set_rate_with`](Self::set_rate_with) would
    /// refuse.
    pub fn with_rate(&self, args: RateArgs) -> Result<Self> {
        validate(&args)?;
        Ok(Self {
            shared: self.shared.clone(),
            rate: Some(args),
        })
    }

    /// The rate this handle sets again when it finds none ([`with_rate`](Self::with_rate)).
    pub fn configured_rate(&self) -> Option<RateArgs> {
        self.rate
    }

    /// Sets the configured rate when none is set; whether this handle has one to set.
    async fn heal(&self) -> Result<bool> {
        let Some(args) = self.rate else {
            return Ok(false);
        };
        if self.set(args, "try").await? {
            tracing::info!(key = %self.shared.key, rate = args.rate, interval = ?args.interval, "rate limiter had no rate (expired or lost with Redis data): set it again");
        }
        Ok(true)
    }

    /// The Redis key of the settings hash.
    pub fn key(&self) -> &str {
        &self.shared.key
    }

    /// The five keys every script takes: settings, overall value, this client's value,
    /// overall permits, this client's permits.
    fn keys(&self) -> [&str; 5] {
        let s = &self.shared;
        [
            &s.key,
            &s.value,
            &s.client_value,
            &s.permits,
            &s.client_permits,
        ]
    }

    /// Sets the rate: `mode` "try" (only if none is set), "set" (in any case) or "update"
    /// (only if one is set); returns whether it did.
    async fn set(&self, args: RateArgs, mode: &str) -> Result<bool> {
        validate(&args)?;
        let RateArgs {
            kind,
            rate,
            interval,
            keep_alive,
            keep_state,
        } = args;
        let ms = ferrisson_core::__engine::time::millis(interval);
        let keep_ms = ferrisson_core::__engine::time::millis(keep_alive);
        let call = ScriptCall::new(&SET_RATE, &self.keys())
            .arg(rate)
            .arg(ms)
            .arg(kind.code())
            .arg(keep_ms)
            .arg(mode)
            .arg(if keep_state { "1" } else { "0" });
        let set: i64 = self.shared.client.eval(&call).await?;
        Ok(set == 1)
    }

    /// Sets the rate unless one is set (Redisson's `trySetRate`); returns whether it did.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a zero rate, a rate beyond 2^53 - 1 or an interval
    /// outside 1 ms..2^50 ms,
    /// [`Error::WrongType`], [`Error::Redis`].
    pub async fn try_set_rate(
        &self,
        kind: RateType,
        rate: u64,
        interval: Duration,
    ) -> Result<bool> {
        self.try_set_rate_with(RateArgs::new(kind, rate, interval))
            .await
    }

    /// Sets the rate unless one is set, with a keep-alive (Redisson's `trySetRate` with
    /// `keepAliveTime`); returns whether it did. There is no state to keep.
    ///
    /// # Errors
    ///
    /// As [`try_set_rate`](Self::try_set_rate), and [`Error::InvalidArgument`] for a
    /// keep-alive shorter than the interval.
    pub async fn try_set_rate_with(&self, args: RateArgs) -> Result<bool> {
        self.set(args, "try").await
    }

    /// Sets the rate, replacing any, and starts the window afresh (Redisson's `setRate`): the
    /// window the rate applies to, overall or this client's, and both when the type changes.
    /// Other clients' per-client windows start afresh as their permits come back.
    ///
    /// # Errors
    ///
    /// As [`try_set_rate`](Self::try_set_rate).
    pub async fn set_rate(&self, kind: RateType, rate: u64, interval: Duration) -> Result<()> {
        self.set_rate_with(RateArgs::new(kind, rate, interval))
            .await
    }

    /// Sets the rate, replacing any (Redisson's `setRate(RateLimiterArgs)`): the window starts
    /// afresh unless [`RateArgs::keep_state`] (then the permits given in the last interval stay
    /// given) or the type changes (then it always does).
    ///
    /// # Errors
    ///
    /// As [`try_set_rate_with`](Self::try_set_rate_with).
    pub async fn set_rate_with(&self, args: RateArgs) -> Result<()> {
        self.set(args, "set").await.map(drop)
    }

    /// Changes the rate of a limiter that has one (Redisson's `updateRate`); returns whether
    /// it had one (when not, nothing is written). The window as for
    /// [`set_rate_with`](Self::set_rate_with).
    ///
    /// # Errors
    ///
    /// As [`try_set_rate_with`](Self::try_set_rate_with).
    pub async fn update_rate(&self, args: RateArgs) -> Result<bool> {
        self.set(args, "update").await
    }

    /// The permits the window has left right now, for this client's window under a
    /// per-client rate (Redisson's `availablePermits`).
    ///
    /// # Errors
    ///
    /// [`Error::NotSetUp`] when no rate is set, [`Error::WrongType`], [`Error::Redis`].
    pub async fn available_permits(&self) -> Result<u64> {
        let call = ScriptCall::new(&AVAILABLE, &self.keys());
        let mut reply: Vec<i64> = self.shared.client.eval(&call).await?;
        if matches!(reply.as_slice(), [2, _]) && self.heal().await? {
            reply = self.shared.client.eval(&call).await?;
        }
        match reply.as_slice() {
            [1, left] => Ok(u64::try_from(*left).unwrap_or(0)),
            [2, _] => Err(self.not_set_up()),
            other => Err(self.protocol(other)),
        }
    }

    /// Gives `permits` back to the window (Redisson's `release`): the permits given longest
    /// ago leave it, and as many are left again, up to the rate. For a call that took permits
    /// and did not use them. Zero permits: nothing is sent.
    ///
    /// # Cancel safety
    ///
    /// A release whose caller drops it, or whose reply is lost, is sent again in the
    /// background under the same record slot and number: Redis gives the permits back once.
    ///
    /// # Errors
    ///
    /// [`Error::NotSetUp`] when no rate is set, [`Error::WrongType`], [`Error::Redis`].
    pub async fn release(&self, permits: u32) -> Result<()> {
        if permits == 0 {
            return Ok(());
        }
        let s = &self.shared;
        // The release's slot in the record stays taken until it is settled, resend included:
        // dropped, or left unknown, it is sent again in the background (Redis counts it once).
        let recorded = Arc::new(s.record.start(&s.client));
        let call = |resend: bool| {
            let call = ScriptCall::new(&RELEASE, &self.keys())
                .arg(permits)
                .arg(s.record.client_hex());
            recorded.form_args(call, &s.client, resend, "")
        };
        let mut reply: i64 = recorded
            .send_through(&s.client, &call(false), &call(true))
            .await?;
        if reply == 2 && self.heal().await? {
            // A window set afresh has nothing to give back: the release is done.
            reply = 1;
        }
        match reply {
            1 => Ok(()),
            2 => Err(self.not_set_up()),
            other => Err(self.protocol(&[other])),
        }
    }

    fn not_set_up(&self) -> Error {
        Error::NotSetUp(format!(
            "rate limiter `{}` has no rate (never set, expired, or lost with Redis data): set it with try_set_rate, or build the limiter with a rate (with_rate), which sets a lost one again",
            self.shared.key
        ))
    }

    fn protocol(&self, reply: &[i64]) -> Error {
        Error::Protocol(format!(
            "a rate limiter script of `{}` replied {reply:?}",
            self.shared.key
        ))
    }

    /// The rate set: whom it applies to, the permits and the interval (`None`: none set).
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`], [`Error::Redis`].
    pub async fn rate(&self) -> Result<Option<(RateType, u64, Duration)>> {
        let (rate, interval, kind): (Option<u64>, Option<u64>, Option<String>) = self
            .shared
            .client
            .query(
                redis::cmd("HMGET")
                    .arg(&self.shared.key)
                    .arg("rate")
                    .arg("interval")
                    .arg("type"),
            )
            .await?;
        Ok(match (rate, interval, kind) {
            (Some(rate), Some(interval), Some(kind)) => Some((
                if kind == "1" {
                    RateType::PerClient
                } else {
                    RateType::Overall
                },
                rate,
                Duration::from_millis(interval),
            )),
            _ => None,
        })
    }

    /// Takes `permits`, waiting as long as it takes.
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Self::try_acquire).
    pub async fn acquire(&self, permits: u32) -> Result<()> {
        self.take(permits, None).await.map(|_| ())
    }

    /// Takes `permits` if the window has them right now; returns whether it did.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for more permits than the rate gives per interval,
    /// [`Error::NotSetUp`] when no rate is set, [`Error::WrongType`], [`Error::Redis`].
    pub async fn try_acquire(&self, permits: u32) -> Result<bool> {
        self.take(permits, Some(Duration::ZERO)).await
    }

    /// Takes `permits` within the options' wait (none given or zero: one try); returns whether
    /// it did. A call that cannot have them before its wait ends returns at once.
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Self::try_acquire), and [`Error::InvalidArgument`] for options with a
    /// lease (a rate limiter's permits are not given back).
    pub async fn try_acquire_with(&self, permits: u32, options: AcquireOptions) -> Result<bool> {
        let wait = wait_without_lease(options, &self.shared.key)?;
        self.take(permits, Some(wait.unwrap_or(Duration::ZERO)))
            .await
    }

    /// Every acquire's wait (`None`: as long as it takes): a try, then (unless the wait is zero) a
    /// sleep until the window gives permits back, through outages as every wait does (the
    /// engine's polled wait).
    async fn take(&self, permits: u32, wait: Option<Duration>) -> Result<bool> {
        if permits == 0 {
            return Ok(true);
        }
        let deadline = wait.and_then(ferrisson_core::__engine::time::deadline_after);
        let what = ferrisson_core::__engine::Acquisition {
            client: &self.shared.client,
            kind: "rate_limiter",
            key: &self.shared.key,
            owner: None,
            permits: Some(permits),
            wait,
        };
        let taken = ferrisson_core::__engine::acquisition(what, |progress| {
            self.poll_permits(permits, wait, deadline, progress)
        });
        Ok(taken.await?.is_some())
    }

    /// [`take`](Self::take)'s tries until the permits are given, or the wait is over.
    async fn poll_permits(
        &self,
        permits: u32,
        wait: Option<Duration>,
        deadline: Option<Instant>,
        progress: std::sync::Arc<ferrisson_core::metrics::Progress>,
    ) -> Result<Option<()>> {
        let progress = &progress;
        poll_wait(&self.shared.client, deadline, |_| async move {
            progress.tried();
            let Some(ms) = self.try_once(permits).await? else {
                return Ok(Poll::Ready(()));
            };
            if wait == Some(Duration::ZERO) {
                return Ok(Poll::GiveUp);
            }
            ferrisson_core::__engine::note_wait(
                progress,
                &self.shared.client,
                ferrisson_core::__engine::WaitFor {
                    kind: "rate_limiter",
                    key: &self.shared.key,
                    owner: None,
                    permits: Some(permits),
                    limit: None,
                },
            );
            let back_in = Duration::from_millis(ms);
            let wake = ferrisson_core::__engine::time::later(Instant::now(), back_in);
            Ok(if deadline.is_some_and(|deadline| wake > deadline) {
                // The permits come back too late for this call.
                Poll::GiveUp
            } else {
                Poll::After(back_in)
            })
        })
        .await
    }

    /// One acquire script call (resent after a lost reply, which then finds what the lost
    /// run took): `None` when taken, `Some(ms)` when the permits come back in `ms`.
    async fn try_once(&self, permits: u32) -> Result<Option<u64>> {
        let s = &self.shared;
        // New random bytes per try; its copies (a resend after a lost reply) keep them.
        let random = uuid::Uuid::new_v4().as_u64_pair().0.to_le_bytes();
        let call = ScriptCall::new(&TRY_ACQUIRE, &self.keys())
            .arg(permits)
            .arg(&random[..]);
        let mut reply: Vec<i64> = s.client.eval_each(|_| call.clone()).await?;
        if matches!(reply.as_slice(), [2, _]) && self.heal().await? {
            reply = s.client.eval_each(|_| call.clone()).await?;
        }
        match reply.as_slice() {
            [1, _] => Ok(None),
            [0, ms] => Ok(Some(u64::try_from(*ms).unwrap_or(1).max(1))),
            [2, _] => Err(self.not_set_up()),
            [3, rate] => Err(Error::InvalidArgument(format!(
                "{permits} permits asked of `{}`, whose rate gives at most {rate} per interval",
                s.key
            ))),
            other => Err(self.protocol(other)),
        }
    }
}

/// Refuses a rate the scripts cannot keep: nothing is sent.
fn validate(args: &RateArgs) -> Result<()> {
    let RateArgs {
        rate,
        interval,
        keep_alive,
        ..
    } = *args;
    if rate == 0 {
        return Err(Error::InvalidArgument("a rate must be at least 1".into()));
    }
    if rate > MAX_RATE {
        return Err(Error::InvalidArgument(format!(
            "a rate of {rate} is beyond {MAX_RATE} (2^53 - 1), the counts the scripts keep exact: nothing was written"
        )));
    }
    let ms = ferrisson_core::__engine::time::millis(interval);
    if interval < Duration::from_millis(1) || ms > MAX_INTERVAL_MS {
        return Err(Error::InvalidArgument(format!(
            "a rate's interval must be at least 1 ms and at most 2^50 ms, got {interval:?}"
        )));
    }
    let keep_ms = ferrisson_core::__engine::time::millis(keep_alive);
    if !keep_alive.is_zero() && (keep_alive < interval || keep_ms > MAX_INTERVAL_MS) {
        return Err(Error::InvalidArgument(format!(
            "a keep-alive must be zero (none) or at least the interval ({interval:?}) and at most 2^50 ms, got {keep_alive:?}"
        )));
    }
    Ok(())
}

/// The fields of the settings hash (Redisson's `RRateLimiter` layout, with `keepAliveTime`),
/// each a number: what a key must hold to be taken for a limiter's settings. The object scripts
/// (expire, delete) take it as an argument; the limiter's own scripts, which read the settings
/// on every call, keep the same list as a table (`limiter_settings` in
/// `lua/rate_limiter/prelude.lua`) instead of parsing an argument each time.
const SETTINGS: ferrisson_core::__engine::KeyShape =
    ferrisson_core::__engine::KeyShape::NumberHash("rate,interval,type,keepAliveTime");

/// The limiter's keys: the settings hash, the window's permits and values, overall and this
/// client's (an expiry and a delete cover all five, as Redisson's do). A delete sends no
/// message: a later acquire fails with [`Error::NotSetUp`] until a rate is set again.
impl ferrisson_core::__engine::ObjectLayout for RateLimiter {
    fn object_keys(&self) -> ferrisson_core::__engine::ObjectKeys<'_> {
        let s = &self.shared;
        ferrisson_core::__engine::ObjectKeys::new(
            &s.client,
            SETTINGS,
            vec![
                &s.key,
                &s.value,
                &s.permits,
                &s.client_value,
                &s.client_permits,
            ],
        )
    }
}
