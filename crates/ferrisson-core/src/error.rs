//! The one error type of the suite.

use std::time::Duration;

/// A `Result` whose error defaults to [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a synchronizer call failed.
///
/// Contention is not an error: `try_*` calls return `Ok(None)` (or `Ok(false)`) when the
/// synchronizer is taken, so that callers can tell "busy" from "broken".
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The caller does not hold what it tried to release or renew.
    #[error("not the owner: {0}")]
    NotOwner(String),

    /// A wait ran out of time before the synchronizer could be taken.
    #[error("timed out after {0:?}")]
    Timeout(Duration),

    /// The lease of a hold ended (renewal failed, key deleted, Redis restarted or the process
    /// stalled past the lease) before the holder released it: another holder may have run.
    #[error("lease lost: {0}")]
    LeaseLost(LossReason),

    /// An argument was out of range or malformed; nothing was sent to Redis.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// The call can never succeed as asked: it would wait for itself (a read-write lock's
    /// reader asking for the write lock while it still reads). Nothing changed.
    #[error("would deadlock: {0}")]
    WouldDeadlock(String),

    /// Deadlock detection is on ([`ClientConfig::with_deadlock_detection`](crate::ClientConfig::with_deadlock_detection))
    /// and this waiter was chosen to end a cycle of waits across processes: every task in the
    /// cycle holds what the next one waits for. The message names the cycle (each task's
    /// application, host and pid, what it holds and what it waits for). One waiter per cycle
    /// gets it; the call took nothing, and what the caller still holds is its to give back
    /// (dropping its guards lets the others go on).
    #[error("deadlock: {0}")]
    Deadlock(String),

    /// The key exists but holds another Redis data type than the synchronizer uses.
    #[error("key `{key}` holds a value of another type than this synchronizer uses")]
    WrongType {
        /// The key that holds the unexpected type.
        key: String,
    },

    /// A waiting call found nothing to wait for: the synchronizer was never set up, or Redis
    /// lost it (a restart without persistence, `FLUSHALL`, a failover), so that no release
    /// could ever end the wait. (A semaphore built with a limit restores itself instead.)
    #[error("{0}")]
    NotSetUp(String),

    /// A waiter saw its latch armed, then found it gone without it having opened: Redis lost
    /// it (a restart without persistence, `FLUSHALL`, a failover to a replica that had not
    /// got it) or its keys were removed by other means than the latch's own calls. The
    /// barrier did not open, and the count-downs made in its round are gone with it.
    #[error("latch lost: {0}")]
    LatchLost(String),

    /// The Redis user may not run what the synchronizers need (an ACL without `@scripting`,
    /// without `@pubsub` or without channel access): found at connect, before any call could
    /// be half done. The message names the address and the rights to grant.
    #[error("{0}")]
    NotPermitted(String),

    /// Replica sync is on and fewer replicas than required acknowledged a change in time
    /// (Redisson's "None of slaves were synced"). An acquire that ends with this error was
    /// rolled back: nothing is held.
    #[error("only {acked} of {wanted} replicas acknowledged the change within the sync timeout")]
    NotReplicated {
        /// Replicas that acknowledged.
        acked: u32,
        /// Replicas waited for.
        wanted: u32,
    },

    /// The server at `address` answered but refused the client: wrong or missing credentials,
    /// or a database index it does not have. Retrying cannot help; `reason` says what to fix.
    #[error("redis at {address} refused the client: {reason}")]
    Rejected {
        /// Where the client connects (the URL without its password).
        address: String,
        /// What the server refused, and what to check.
        reason: String,
    },

    /// Redis answered with something this protocol version does not expect.
    #[error("unexpected reply from redis: {0}")]
    Protocol(String),

    /// Redis returned an error, or the connection failed on a call that named no server.
    #[error("redis error: {0}")]
    Redis(#[from] redis::RedisError),

    /// Redis could not be reached at `address` (the URL without its password, the cluster's
    /// seed nodes, or the sentinels): the connection was refused, broke, or no reply came in
    /// time. The message says what to check.
    #[error(
        "cannot reach redis at {address}: {source} ({})",
        unreachable_hint(source)
    )]
    Unreachable {
        /// Where the client connects.
        address: String,
        /// What the connection reported.
        #[source]
        source: redis::RedisError,
    },

    /// Work spread over several steps could not all be done (a shutdown whose cleanups did not
    /// finish in time, a RedLock unlock that fewer than a quorum of instances confirmed): the
    /// message says what was left undone and how it ends by itself.
    #[error("unfinished: {0}")]
    Unfinished(String),

    /// The client cannot run: there is no Tokio runtime for its background tasks, or it was
    /// shut down ([`Client::shutdown`](crate::Client::shutdown)).
    #[error("client closed: {0}")]
    Closed(&'static str),
}

impl Error {
    /// `Ok(())` when nothing was lost (`loss` is `None`), else [`Error::LeaseLost`] with the
    /// reason: what every guard's and hold's `ensure_held` answers.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] with `loss`.
    pub fn unless_lost(loss: Option<LossReason>) -> Result<()> {
        match loss {
            Some(reason) => Err(Error::LeaseLost(reason)),
            None => Ok(()),
        }
    }
}

/// What to check when Redis cannot be reached, from what the connection reported.
fn unreachable_hint(e: &redis::RedisError) -> &'static str {
    let text = e.to_string().to_lowercase();
    if text.contains("certificate") || text.contains("tls") || text.contains("handshake") {
        "the TLS handshake failed: check the CA, the client certificate and key, and the server name (docs/deployment.md, TLS)"
    } else if e.is_connection_refusal() {
        "is redis-server running there, and is the host and port right?"
    } else if e.is_timeout() {
        "no reply in time: is the server overloaded, paused or behind a firewall? the client's response_timeout and connect_timeout set the patience"
    } else if e.kind() == redis::ErrorKind::Parse {
        "what answered does not speak the Redis protocol: is the port right?"
    } else {
        "the connection failed: check the network between this process and the server"
    }
}

impl Error {
    /// Whether this error may be transient: a retry after the connection comes back can succeed.
    pub fn is_connection_error(&self) -> bool {
        match self {
            Error::Redis(e) | Error::Unreachable { source: e, .. } => is_transient(e),
            _ => false,
        }
    }

    /// A connection error of `client`, naming where it connects (see [`Error::Unreachable`]);
    /// any other error as it is.
    pub(crate) fn naming(self, address: &str) -> Error {
        match self {
            Error::Redis(source) if is_transient(&source) => Error::Unreachable {
                address: address.to_owned(),
                source,
            },
            other => other,
        }
    }
}

impl Error {
    /// Whether the call is known not to have run: the server refused the connection, or
    /// refused the command for a passing reason (`MOVED`, `LOADING`, `TRYAGAIN`, `CLUSTERDOWN`, `MASTERDOWN`, `READONLY`: the command did not run).
    pub fn is_refused_connection(&self) -> bool {
        matches!(self, Error::Redis(e) | Error::Unreachable { source: e, .. } if e.is_connection_refusal() || refused_by_server(e))
    }
}

/// Whether a redis error is one the client retries (the connection broke or timed out, or the
/// server is loading or not yet ready).
pub(crate) fn is_transient(e: &redis::RedisError) -> bool {
    if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() || e.is_connection_refusal() {
        return true;
    }
    refused_by_server(e)
}

/// Whether the server refused a command without running it, for a reason that passes: it is
/// loading its data, or it is not (or no longer) the primary of the command's keys while a
/// cluster's slots move or a failover runs (`MOVED` and `ASK` that the cluster connection could
/// not follow, `TRYAGAIN`, `CLUSTERDOWN`, `MASTERDOWN`; `READONLY` from a primary demoted to a
/// replica).
pub(crate) fn refused_by_server(e: &redis::RedisError) -> bool {
    // No connection to the slot's node yet (a cluster's topology is changing): never sent.
    e.kind() == redis::ErrorKind::ClusterConnectionNotFound
        || matches!(
            e.code(),
            Some("LOADING")
                | Some("TRYAGAIN")
                | Some("MASTERDOWN")
                | Some("CLUSTERDOWN")
                | Some("MOVED")
                | Some("ASK")
                | Some("READONLY")
        )
}

/// Why a hold was lost. Carried by [`Error::LeaseLost`] and by the loss signal on guards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LossReason {
    /// A renewal reached Redis and Redis answered that this owner no longer holds the key
    /// (deleted, expired, force-unlocked or lost in a restart or failover).
    NotHeld,
    /// Renewals kept failing (Redis unreachable) until the lease could have run out.
    RenewalFailed,
    /// The watchdog ran too late to renew in time (the process or runtime stalled past the
    /// lease): the lease may have run out on the server.
    Stalled,
    /// A hold taken with a fixed lease reached the end of that lease.
    LeaseExpired,
    /// The acquire's reply took longer than the lease: by the time it arrived, the lease it
    /// set could have run out on the server (a slow round trip, a stalled connection).
    ExpiredInFlight,
    /// Replica sync is on, and renewals failed until the lease could have run out on the
    /// replicas, the last one the primary answered unacknowledged by them: the primary may
    /// still have the hold, but a failover would lose it.
    NotReplicated,
    /// The client was shut down ([`Client::shutdown`](crate::Client::shutdown)) while this
    /// hold's guard was still alive: the watchdog no longer renews it, and it ends on the
    /// server when its lease runs out.
    ClientShutDown,
}

impl LossReason {
    /// A short name for logs and metrics labels: `not_held`, `renewal_failed`, `stalled`,
    /// `lease_expired`, `expired_in_flight`, `not_replicated`, `client_shut_down`.
    pub fn name(self) -> &'static str {
        match self {
            LossReason::NotHeld => "not_held",
            LossReason::RenewalFailed => "renewal_failed",
            LossReason::Stalled => "stalled",
            LossReason::LeaseExpired => "lease_expired",
            LossReason::ExpiredInFlight => "expired_in_flight",
            LossReason::NotReplicated => "not_replicated",
            LossReason::ClientShutDown => "client_shut_down",
        }
    }
}

impl std::fmt::Display for LossReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LossReason::NotHeld => "redis no longer has this owner's hold",
            LossReason::RenewalFailed => "renewals failed until the lease could have expired",
            LossReason::Stalled => "the watchdog ran too late to renew before the lease ended",
            LossReason::LeaseExpired => "the fixed lease ran out",
            LossReason::ExpiredInFlight => {
                "the lease could have run out before the acquire's reply arrived"
            }
            LossReason::NotReplicated => {
                "no replica acknowledged the renewals before the lease could have expired there"
            }
            LossReason::ClientShutDown => {
                "the client was shut down: the hold is no longer renewed and ends with its lease"
            }
        })
    }
}

/// Turn a redis error into ours, naming `key` when the server reports a wrong type.
pub fn map_redis_error(e: redis::RedisError, key: &str) -> Error {
    if e.code() == Some("WRONGTYPE") {
        Error::WrongType {
            key: key.to_owned(),
        }
    } else {
        Error::Redis(e)
    }
}

/// A reply that is an error as an `Err`; the values nested in any other reply untouched.
pub(crate) fn top_level_error(value: redis::Value) -> redis::RedisResult<redis::Value> {
    match value {
        redis::Value::ServerError(e) => Err(e.into()),
        other => Ok(other),
    }
}
