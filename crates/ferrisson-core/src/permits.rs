//! What the two semaphores share: the permit count's changes, and a waiter's reservation.

use crate::client::Client;
use crate::error::{Error, Result};
use crate::script::{Script, ScriptCall};

/// Sets or changes a permit count and publishes it (`lua/core/permits_update.lua`).
pub static PERMITS_UPDATE: Script = Script::new(
    "core/permits_update",
    include_str!("../lua/permits_update.lua"),
);

/// Gives up a waiter's reservation (`lua/core/permits_leave.lua`).
pub static PERMITS_LEAVE: Script = Script::new(
    "core/permits_leave",
    include_str!("../lua/permits_leave.lua"),
);

/// How a permit count changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CountChange {
    /// Set it, only when no count is set.
    TrySet(u32),
    /// Set it.
    Set(u32),
    /// Add to it (negative: take away, below zero too).
    Add(i64),
}

/// Changes the permit count at `key`, publishing the new count on `channel`. Returns whether
/// it changed (`TrySet` finds a count set: no) and the count after.
///
/// Sent once, never retried: an `Add` whose reply was lost must not add twice.
///
/// # Errors
///
/// [`Error::WrongType`] when the key holds something else than a count, [`Error::Redis`].
pub async fn change_permits(
    client: &Client,
    key: &str,
    channel: &str,
    change: CountChange,
) -> Result<(bool, i64)> {
    let (mode, value) = match change {
        CountChange::TrySet(n) => ("try_set", i64::from(n)),
        CountChange::Set(n) => ("set", i64::from(n)),
        CountChange::Add(n) => ("add", n),
    };
    let call = ScriptCall::new(&PERMITS_UPDATE, &[key, channel])
        .arg(mode)
        .arg(value)
        .arg(client.config().publish().as_str());
    let reply: Vec<i64> = client.eval_once(&call).await?;
    match reply.as_slice() {
        [changed, count] => Ok((*changed == 1, *count)),
        other => Err(Error::Protocol(format!(
            "core/permits_update replied {other:?}"
        ))),
    }
}

/// The permit count at `key`: 0 when none is set.
///
/// # Errors
///
/// [`Error::WrongType`] when the key holds something else than a count, [`Error::Redis`].
pub async fn read_permits(client: &Client, key: &str) -> Result<i64> {
    let value: Option<String> = client.query(redis::cmd("GET").arg(key)).await?;
    match value {
        None => Ok(0),
        Some(v) => v.parse().map_err(|_| Error::WrongType {
            key: key.to_owned(),
        }),
    }
}

/// Gives up `waiter`'s reservation in `reservation` (if it holds it) and publishes the count on
/// `channel`, so that callers it held back try again. Failures are logged: the reservation then
/// expires by itself.
pub async fn leave_reservation(
    client: &Client,
    key: &str,
    channel: &str,
    reservation: &str,
    waiter: &str,
) {
    let call = ScriptCall::new(&PERMITS_LEAVE, &[key, channel, reservation])
        .arg(waiter)
        .arg(client.config().publish().as_str());
    if let Err(e) = client.eval::<i64>(&call).await {
        tracing::warn!(%key, error = %e, "giving up a reservation failed; it expires by itself");
    }
}
