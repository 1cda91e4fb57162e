//! What every lock kind names the same way ([`LockNames`]), made in one place.

use std::sync::Arc;

use crate::client::{Client, ClientEngine};
use crate::error::Result;
use crate::record::CallRecord;

/// What every lock kind names the same way, made in one place ([`new`](Self::new)): the client,
/// the lock's key, whether its acquisitions hand out fencing tokens, and the client's record
/// on it. A kind's state keeps one and gives it to the engine ([`HoldKind::names`]); the
/// engine reads the client, key, fencing and record from it, so no kind repeats those
/// accessors.
///
/// [`HoldKind::names`]: super::HoldKind::names
#[derive(Debug, Clone)]
pub struct LockNames {
    /// The client the lock runs on.
    pub client: Client,
    /// The lock's key: its name after the client's namespace prefix.
    pub key: Arc<str>,
    /// Whether acquisitions hand out fencing tokens.
    pub fenced: bool,
    /// The client's record on the lock, where its releases record what they did, so that a
    /// resend after a lost reply counts once; `None` for a kind whose resends read the lock's
    /// own state (the lean mutex).
    pub record: Option<CallRecord>,
    /// The client's undone marks on the lock, `suffixed(key, "undone")`, `:` and the client
    /// id: the acquires of every lock kind read them, so that a copy of a resent call that ran
    /// takes nothing ([`TryArgs::seq`](super::TryArgs::seq)). Made at its first use: a handle
    /// whose acquires never run a script (the lean mutex's one-command try) never makes it.
    undone: std::sync::OnceLock<String>,
}

impl LockNames {
    /// The names of the lock `name` (after the client's namespace prefix), with a record on it
    /// when `recorded`.
    ///
    /// # Errors
    ///
    /// [`crate::Error::InvalidArgument`] for a name the client refuses (empty, or across
    /// slots on a cluster).
    pub fn new(client: &Client, name: &str, fenced: bool, recorded: bool) -> Result<Self> {
        let key = client.object_key(name)?;
        Ok(Self {
            client: client.clone(),
            record: recorded.then(|| CallRecord::new(client, &key)),
            undone: std::sync::OnceLock::new(),
            key: key.into(),
            fenced,
        })
    }

    /// The key of the client's record on the lock (`""` without one), which release scripts
    /// name among their keys.
    pub fn record_key(&self) -> &str {
        self.record.as_ref().map_or("", CallRecord::key)
    }

    /// The key of the client's undone marks on the lock, which acquire scripts name among
    /// their keys.
    pub fn undone_key(&self) -> &str {
        self.undone.get_or_init(|| {
            self.client
                .client_latch(&crate::keys::suffixed(&self.key, "undone"))
        })
    }
}
