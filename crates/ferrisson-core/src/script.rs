//! Lua scripts: embedded at build time, run by `EVALSHA` with a `NOSCRIPT` fallback.
//!
//! Each synchronizer crate declares its scripts as statics:
//!
//! ```ignore
//! static ACQUIRE: Script = Script::new("lock/acquire", include_str!("../lua/acquire.lua"));
//! ```
//!
//! The file's header names its operation and the protocol version it implements
//! (`-- operation: lock/acquire`, `-- protocol: 1`); [`Script::header`] reads them so that
//! tests can check every file against the registry and against [`PROTOCOL_VERSION`].

use std::borrow::Cow;
use std::sync::OnceLock;

use crate::error::{Error, Result};

/// The version of the Redis state protocol (`docs/protocol.md`) this build implements.
pub const PROTOCOL_VERSION: u32 = 1;

/// One Lua script of the protocol.
#[derive(Debug)]
pub struct Script {
    name: &'static str,
    source: &'static str,
    compiled: OnceLock<redis::Script>,
}

/// What a script's header says about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptHeader {
    /// The operation, `<primitive>/<operation>`.
    pub operation: String,
    /// The protocol version the script implements.
    pub protocol: u32,
}

impl Script {
    /// A script named `name` (`<primitive>/<operation>`) with the given source text.
    pub const fn new(name: &'static str, source: &'static str) -> Self {
        Self {
            name,
            source,
            compiled: OnceLock::new(),
        }
    }

    /// The registry name, `<primitive>/<operation>`.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The Lua source.
    pub fn source(&self) -> &'static str {
        self.source
    }

    /// The SHA1 digest `EVALSHA` uses.
    pub fn sha1(&self) -> &str {
        self.compiled().get_hash()
    }

    fn compiled(&self) -> &redis::Script {
        self.compiled
            .get_or_init(|| redis::Script::new(self.source))
    }

    /// Reads the `operation` and `protocol` lines of the header (the leading `--` comments).
    ///
    /// # Errors
    ///
    /// [`Error::Protocol`] when either line is missing or malformed.
    pub fn header(&self) -> Result<ScriptHeader> {
        let mut operation = None;
        let mut protocol = None;
        for line in self.source.lines() {
            let Some(comment) = line.trim().strip_prefix("--") else {
                break;
            };
            let comment = comment.trim();
            if let Some(v) = comment.strip_prefix("operation:") {
                operation = Some(v.trim().to_owned());
            } else if let Some(v) = comment.strip_prefix("protocol:") {
                protocol = v.trim().parse::<u32>().ok();
            }
        }
        match (operation, protocol) {
            (Some(operation), Some(protocol)) => Ok(ScriptHeader {
                operation,
                protocol,
            }),
            _ => Err(Error::Protocol(format!(
                "script {} lacks an `operation:` or `protocol:` header line",
                self.name
            ))),
        }
    }
}

/// One call of a script: its keys and arguments. Keys may be borrowed, and arguments are
/// written into one buffer, so building a call allocates little.
#[derive(Debug, Clone, Default)]
pub struct ScriptCall<'a> {
    pub(crate) keys: Vec<Cow<'a, str>>,
    /// The arguments, in a command used as a buffer (never sent as is).
    pub(crate) args: redis::Cmd,
}

impl<'a> ScriptCall<'a> {
    /// An empty call.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a key (`KEYS[n]`).
    pub fn key(mut self, key: impl Into<Cow<'a, str>>) -> Self {
        self.keys.push(key.into());
        self
    }

    /// Appends an argument (`ARGV[n]`).
    pub fn arg(mut self, arg: impl redis::ToRedisArgs) -> Self {
        self.args.arg(arg);
        self
    }

    /// The keys of the call.
    pub fn keys(&self) -> &[Cow<'a, str>] {
        &self.keys
    }

    /// The arguments of the call, each as bytes.
    pub(crate) fn args(&self) -> impl Iterator<Item = &[u8]> {
        self.args.args_iter().filter_map(|arg| match arg {
            redis::Arg::Simple(bytes) => Some(bytes),
            _ => None,
        })
    }
}
