//! **\[ext\]** Who a client is, for an operator looking at Redis: the name of its connections
//! (`CLIENT SETNAME`) and its record under `ferrisson_client:<tag>` ([docs/protocol.md](https://github.com/ferrisson/ferrisson/blob/main/docs/protocol.md),
//! "[ext] Client records"), refreshed while the client lives and gone one lease after it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::script::{Script, ScriptCall};

/// The prefix of every client record's key.
pub const RECORD_PREFIX: &str = "ferrisson_client";

/// Writing a client's record and its expiry at once (`lua/core/client_record.lua`).
pub(crate) static CLIENT_RECORD: Script = Script::new(
    "core/client_record",
    include_str!("../lua/client_record.lua"),
);

/// A client's tag: the first 64 bits of its id (a UUID, dashes left out), which names its
/// record and starts every permit id it makes, so that a record is found from an owner
/// (`<client id>:<n>`) and from a permit id alike. `None` for an id that is no UUID (a peer's
/// token, say).
pub fn client_tag(id: &str) -> Option<u64> {
    let uuid = uuid::Uuid::try_parse(id.get(..36)?).ok()?;
    u64::try_from(uuid.as_u128() >> 64).ok()
}

/// The key of the record of the client whose tag is `tag`.
pub fn record_key(tag: u64) -> String {
    format!("{RECORD_PREFIX}:{tag:016x}")
}

/// What a client says of itself, in its record and its connections' name.
#[derive(Debug, Clone)]
pub(crate) struct Identity {
    pub(crate) id: String,
    pub(crate) app: String,
    host: String,
    pid: u32,
    started_ms: u64,
    /// How long the record lives unless refreshed, and how often the client refreshes it (ms):
    /// a reader tells a live client's record from a dead one's by its time to live.
    lease_ms: u64,
    period_ms: u64,
    /// Whether the client finds deadlocks: a cycle's victim is picked among such clients'
    /// tasks first, so that a cycle with one of them in it ends.
    detects: bool,
}

impl Identity {
    pub(crate) fn new(
        id: &str,
        app: Option<&str>,
        (lease, period): (Duration, Duration),
        detects: bool,
    ) -> Self {
        Self {
            id: id.to_owned(),
            app: app.map_or_else(default_app_name, str::to_owned),
            host: host_name(),
            pid: std::process::id(),
            started_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            lease_ms: crate::time::millis(lease),
            period_ms: crate::time::millis(period),
            detects,
        }
    }

    /// The record's key.
    pub(crate) fn key(&self) -> String {
        record_key(client_tag(&self.id).unwrap_or_default())
    }

    /// The connection name: `ferrisson:<app>:<tag>`, the app's name with every character
    /// `CLIENT SETNAME` refuses (spaces, newlines) and every `:` made `_`.
    pub(crate) fn connection_name(&self) -> String {
        let app: String = self
            .app
            .chars()
            .map(|c| {
                if c.is_ascii_graphic() && c != ':' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        format!(
            "ferrisson:{app}:{:016x}",
            client_tag(&self.id).unwrap_or_default()
        )
    }

    /// The record's script call, to live `lease` from now.
    pub(crate) fn record_call(&self, lease: Duration) -> ScriptCall {
        let key = self.key();
        self.record_fields(
            ScriptCall::new(&CLIENT_RECORD, &[&key]).arg(crate::time::millis(lease).max(1)),
        )
    }

    /// `call` with the record's fields and values added.
    pub(crate) fn record_fields(&self, call: ScriptCall) -> ScriptCall {
        call.arg("id")
            .arg(&self.id)
            .arg("app")
            .arg(&self.app)
            .arg("host")
            .arg(&self.host)
            .arg("pid")
            .arg(self.pid)
            .arg("version")
            .arg(env!("CARGO_PKG_VERSION"))
            .arg("started")
            .arg(self.started_ms)
            .arg("lib")
            .arg("ferrisson")
            .arg("lease")
            .arg(self.lease_ms)
            .arg("period")
            .arg(self.period_ms)
            .arg("detects")
            .arg(u8::from(self.detects))
    }
}

/// The binary's name (its file's stem), else `ferrisson`.
fn default_app_name() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .or_else(|| {
            std::env::args_os().next().and_then(|a| {
                std::path::Path::new(&a)
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
            })
        })
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "ferrisson".to_owned())
}

/// The host's name: `HOSTNAME` when set, else the kernel's (Linux), else `/etc/hostname`,
/// else `unknown`.
fn host_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}
