//! Keeping the client's identity (`crate::identity`) on the server while the client lives: its
//! connections' name and its record.

use std::sync::Weak;
use std::time::Duration;

use super::Inner;

/// What [`keep_identity`] still does: a refusal stops that part for good.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Upkeep {
    naming: bool,
    recording: bool,
}

impl Upkeep {
    pub(crate) fn new(record: bool) -> Self {
        Self {
            naming: true,
            recording: record,
        }
    }
}

/// Names the client's command connection(s) and writes its record once. A refusal (no
/// `client|setname` right, no write right on `ferrisson_client:*`) is logged and that part
/// stops; the client works on without it. An unreachable server is tried again next time.
pub(crate) async fn refresh(client: &crate::Client, upkeep: &mut Upkeep, lease: Duration) {
    let identity = &client.inner.identity;
    if upkeep.naming {
        let name = identity.connection_name();
        let cmd = redis::cmd("CLIENT").arg("SETNAME").arg(&name).clone();
        match client.inner.conn.query(&cmd).await {
            Ok(_) => {}
            Err(e) if crate::error::is_transient(&e) => {
                tracing::debug!(error = %e, "naming the connection: Redis unreachable, trying again next period");
            }
            Err(e) => {
                tracing::warn!(error = %e, name, "the server refused CLIENT SETNAME: the client's connections stay unnamed (grant +client|setname to name them)");
                upkeep.naming = false;
            }
        }
    }
    if upkeep.recording {
        match client.inner.conn.eval(&identity.record_call(lease)).await {
            Ok(_) => {}
            Err(e) if crate::error::is_transient(&e) => {}
            Err(e) => {
                tracing::warn!(error = %e, key = identity.key(), "the server refused the client's record: operators will not see this process's name beside its holds (grant write access to ferrisson_client:*, or turn records off with ClientConfig::with_client_record(false))");
                upkeep.recording = false;
            }
        }
    }
}

/// [`refresh`] every `period` while the client lives (a reconnect gets its name back within
/// a period; a record written with `lease` outlives the process by at most `lease`).
pub(crate) async fn keep_identity(
    inner: Weak<Inner>,
    mut upkeep: Upkeep,
    period: Duration,
    lease: Duration,
) {
    loop {
        let Some(closing) = inner.upgrade().map(|inner| inner.closing.clone()) else {
            return;
        };
        tokio::select! {
            () = tokio::time::sleep(period) => {}
            () = closing.cancelled() => return,
        }
        let Some(client) = inner.upgrade().map(|inner| crate::Client { inner }) else {
            return;
        };
        if client.is_shut_down() {
            return;
        }
        refresh(&client, &mut upkeep, lease).await;
    }
}
