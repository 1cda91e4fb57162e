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

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use crate::error::{Error, Result};

/// The version of the Redis state protocol ([`docs/protocol.md`](https://github.com/ferrisson/ferrisson/blob/main/docs/protocol.md)) this build implements.
pub const PROTOCOL_VERSION: u32 = 1;

/// One Lua script of the protocol.
#[derive(Debug)]
pub struct Script {
    name: &'static str,
    source: &'static str,
    /// The fragments the source starts with, in order (functions it calls), e.g.
    /// [`LOCK_PRELUDE`].
    preludes: [Option<&'static Script>; 2],
    /// The prelude and the source, joined once.
    joined: OnceLock<String>,
    compiled: OnceLock<redis::Script>,
    /// The batch form's source and digest ([`batch_source`](Self::batch_source)).
    batch: OnceLock<(String, redis::Script)>,
    /// Which forms of the script this process has sent ([`SENT_PLAIN`], [`SENT_BATCH`]).
    sent: AtomicU8,
}

/// The plain form of a script has been sent ([`Script::note_sent`]).
const SENT_PLAIN: u8 = 1;
/// The batch form of a script has been sent.
const SENT_BATCH: u8 = 2;

/// The sources of every script (and batch form) this process has sent, in the order first
/// sent: what a connection gives a server that may lack them, before its first call on it
/// ([`sent_sources`]).
static SENT: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());

/// How many sources [`SENT`] holds (it only grows).
static SENT_COUNT: AtomicUsize = AtomicUsize::new(0);

/// The sources of the scripts this process has sent so far ([`Script::note_sent`]), from the
/// `from`th noted on, in the order they were noted.
pub(crate) fn sent_sources(from: usize) -> Vec<&'static str> {
    let sent = SENT.lock().unwrap_or_else(|e| e.into_inner());
    sent.get(from..).map(<[_]>::to_vec).unwrap_or_default()
}

/// How many scripts (and batch forms) this process has sent so far.
pub(crate) fn sent_count() -> usize {
    SENT_COUNT.load(Ordering::Acquire)
}

/// The fencing function (`lua/core/token_prelude.lua`): `next_token(key)` issues fencing tokens
/// that only grow, even after the counter was lost (the server's clock in microseconds is their
/// floor). [`LOCK_PRELUDE`] starts with it; a script that needs no other shared function starts
/// with it alone (each function a prelude defines costs every run of the script).
pub static TOKEN_PRELUDE: Script = Script::new(
    "core/token_prelude",
    include_str!("../lua/token_prelude.lua"),
);

/// The lock scripts' shared functions (`lua/core/lock_prelude.lua`), which they start with
/// ([`Script::with_prelude`]): [`TOKEN_PRELUDE`]'s `next_token(key)`, `foreign_lock(key, rw)`,
/// which refuses a hash that is no lock of the caller's family, and `foreign_object(key,
/// shape)`.
pub static LOCK_PRELUDE: Script = Script::with_prelude(
    "core/lock_prelude",
    &TOKEN_PRELUDE,
    include_str!("../lua/lock_prelude.lua"),
);

/// The functions of a client's undone marks on an object (`lua/core/marks_prelude.lua`):
/// `was_undone`, `mark_undone`, and `late_copy`, with which a lock's acquire takes nothing when
/// it is a copy of a call that was resent and ran. The lock kinds' acquires start with it
/// ([`Script::with_two_preludes`], after [`LOCK_PRELUDE`]); [`RECORD_PRELUDE`] starts with it.
pub static MARKS_PRELUDE: Script = Script::new(
    "core/marks_prelude",
    include_str!("../lua/marks_prelude.lua"),
);

/// The functions of a client's record on an object (`crate::record`,
/// `lua/core/record_prelude.lua`): `record_state`, `record_mark`, and [`MARKS_PRELUDE`]'s.
pub static RECORD_PRELUDE: Script = Script::with_prelude(
    "core/record_prelude",
    &MARKS_PRELUDE,
    include_str!("../lua/record_prelude.lua"),
);

/// The release functions of the locks kept in a hash (`lua/core/release_prelude.lua`), after
/// [`LOCK_PRELUDE`] and the record's ([`RECORD_PRELUDE`]):
/// `release_recorded` answers a copy of a release that ran already from the client's record,
/// `release_record` records an outcome there.
pub static RELEASE_PRELUDE: Script = Script::with_two_preludes(
    "core/release_prelude",
    &LOCK_PRELUDE,
    &RECORD_PRELUDE,
    include_str!("../lua/release_prelude.lua"),
);

/// The end of a script's batch form, which runs several calls of the script in one: the
/// script's own source becomes the body of `op(KEYS, ARGV)` (its parameters shadow the
/// globals, so the body reads its own call's keys and arguments), and this driver calls it once
/// per call. `ARGV[1]` is the number of calls, `ARGV[2]` and `ARGV[3]` the key and argument
/// count of each (the same for all); the calls' keys follow each other in `KEYS`, their
/// arguments after the counts in `ARGV`. The reply has one entry per call: `{reply}` (an empty
/// table for a `nil` reply, which would otherwise end the array), or the call's error, caught so
/// that a call that fails (a key of the wrong type) leaves the others' replies intact, as if
/// each had run alone, one after the other. A caught error is a string (Redis 7.0) or an error
/// table; a string keeps its code (`WRONGTYPE …`), and a Lua runtime error, which has none, gets
/// `ERR`, as a script that fails alone does.
const BATCH_DRIVER: &str = r#"local calls, nk, na = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local out = {}
local k, a = 0, 3
for i = 1, calls do
  local ok, reply = pcall(op, {unpack(KEYS, k + 1, k + nk)}, {unpack(ARGV, a + 1, a + na)})
  k, a = k + nk, a + na
  if not ok then
    if type(reply) ~= 'table' then
      reply = tostring(reply)
      if not string.find(reply, '^%u+ ') then
        reply = 'ERR ' .. reply
      end
      reply = {err = reply}
    end
    out[i] = reply
  elseif reply == nil then
    out[i] = {}
  else
    out[i] = {reply}
  end
end
return out
"#;

/// The top-level functions of prelude text (`local function NAME(` up to a line `end` at the
/// start of a line), as (name, text); comments between them are left out.
pub(crate) fn prelude_functions(prelude: &str) -> Vec<(&str, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    let mut offset = 0;
    for line in prelude.split_inclusive('\n') {
        if start.is_none()
            && let Some(rest) = line.strip_prefix("local function ")
            && let Some(name) = rest.split('(').next()
        {
            start = Some((offset, name.trim()));
        }
        offset += line.len();
        if line.trim_end() == "end"
            && let Some((from, name)) = start.take()
            && let Some(text) = prelude.get(from..offset)
        {
            out.push((name, text));
        }
    }
    out
}

/// Lua code without its comments (`--` outside a string, to the end of the line).
fn without_comments(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    for line in code.lines() {
        let mut quote = None;
        let mut prev = '\0';
        let mut end = line.len();
        for (i, c) in line.char_indices() {
            match quote {
                Some(q) if c == q && prev != '\\' => quote = None,
                Some(_) => {}
                None if c == '\'' || c == '"' => quote = Some(c),
                None if c == '-' && prev == '-' => {
                    end = i - 1;
                    break;
                }
                None => {}
            }
            prev = c;
        }
        out.push_str(&line[..end]);
        out.push('\n');
    }
    out
}

/// Whether `code` calls the function `name` (`name(` not preceded by a name character).
fn calls(code: &str, name: &str) -> bool {
    let pattern = format!("{name}(");
    code.match_indices(&pattern).any(|(at, _)| {
        !code[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == ':')
    })
}

/// The functions of `prelude` that `body` calls, directly or through one another, in the
/// prelude's order.
fn used_functions(prelude: &str, body: &str) -> String {
    let functions = prelude_functions(prelude);
    let mut used = vec![false; functions.len()];
    let mut pending = vec![without_comments(body)];
    while let Some(code) = pending.pop() {
        for (i, (name, text)) in functions.iter().enumerate() {
            if !used[i] && calls(&code, name) {
                used[i] = true;
                pending.push(without_comments(text));
            }
        }
    }
    functions
        .iter()
        .zip(used)
        .filter(|(_, used)| *used)
        .map(|((_, text), _)| *text)
        .collect()
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
            preludes: [None, None],
            joined: OnceLock::new(),
            compiled: OnceLock::new(),
            batch: OnceLock::new(),
            sent: AtomicU8::new(0),
        }
    }

    /// A script whose source starts with the fragment `prelude` (whose local functions it
    /// calls), e.g. [`LOCK_PRELUDE`] for the lock scripts. The header is
    /// read from `source`.
    pub const fn with_prelude(
        name: &'static str,
        prelude: &'static Script,
        source: &'static str,
    ) -> Self {
        Self::with_preludes(name, [Some(prelude), None], source)
    }

    /// A script whose source starts with the fragments `first`, then `second` (neither may
    /// include the other: each is joined whole).
    pub const fn with_two_preludes(
        name: &'static str,
        first: &'static Script,
        second: &'static Script,
        source: &'static str,
    ) -> Self {
        Self::with_preludes(name, [Some(first), Some(second)], source)
    }

    const fn with_preludes(
        name: &'static str,
        preludes: [Option<&'static Script>; 2],
        source: &'static str,
    ) -> Self {
        Self {
            name,
            source,
            preludes,
            joined: OnceLock::new(),
            compiled: OnceLock::new(),
            batch: OnceLock::new(),
            sent: AtomicU8::new(0),
        }
    }

    /// The preludes' functions this script calls, directly or through one another, in the
    /// preludes' order (empty without any): Lua makes a closure of every function a script
    /// defines, on every run, so a script carries only those it uses.
    fn prelude_source(&self) -> String {
        let mut whole = String::new();
        for prelude in self.preludes.iter().flatten() {
            prelude.raw_into(&mut whole);
        }
        used_functions(&whole, self.source)
    }

    /// The whole chain's text, the preludes' before the script's own, unfiltered.
    fn raw_into(&self, out: &mut String) {
        for prelude in self.preludes.iter().flatten() {
            prelude.raw_into(out);
        }
        out.push_str(self.source);
        out.push('\n');
    }

    /// Whether the script changes data (every one but the `…/state` reads): replica sync
    /// follows it.
    pub fn writes(&self) -> bool {
        // The only read-only scripts are the `…/state` ones and `core/inspect`.
        !self.name.ends_with("/state") && self.name != "core/inspect"
    }

    /// The registry name, `<primitive>/<operation>`.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The Lua source Redis runs: the prelude's, if any, then the script's own.
    pub fn source(&self) -> &str {
        if self.preludes[0].is_none() {
            return self.source;
        }
        self.joined
            .get_or_init(|| format!("{}\n{}", self.prelude_source(), self.source))
    }

    /// The SHA1 digest `EVALSHA` uses.
    pub fn sha1(&self) -> &str {
        self.compiled().get_hash()
    }

    fn compiled(&self) -> &redis::Script {
        self.compiled
            .get_or_init(|| redis::Script::new(self.source()))
    }

    fn batch(&self) -> &(String, redis::Script) {
        self.batch.get_or_init(|| {
            let (prelude, own) = (self.prelude_source(), self.source);
            let source =
                format!("{prelude}\nlocal function op(KEYS, ARGV)\n{own}\nend\n{BATCH_DRIVER}");
            let compiled = redis::Script::new(&source);
            (source, compiled)
        })
    }

    /// The Lua source of the script's batch form, which runs several calls of the script in
    /// one script run, each with its own keys and arguments, and answers each one's reply: a
    /// client coalesces concurrent calls into it
    /// ([`ClientConfig::with_coalesce_calls`](crate::ClientConfig::with_coalesce_calls)).
    pub fn batch_source(&self) -> &str {
        &self.batch().0
    }

    /// The SHA1 digest of the batch form.
    pub(crate) fn batch_sha1(&self) -> &str {
        self.batch().1.get_hash()
    }

    /// Notes that the script (its batch form when `batch` is set) is about to be sent, so
    /// that a server that may lack it gets it before its next call ([`sent_sources`]). One
    /// atomic read once noted.
    pub(crate) fn note_sent(&'static self, batch: bool) {
        let bit = if batch { SENT_BATCH } else { SENT_PLAIN };
        if self.sent.load(Ordering::Acquire) & bit != 0 {
            return;
        }
        let mut sent = SENT.lock().unwrap_or_else(|e| e.into_inner());
        if self.sent.fetch_or(bit, Ordering::AcqRel) & bit == 0 {
            sent.push(if batch {
                self.batch_source()
            } else {
                self.source()
            });
            SENT_COUNT.store(sent.len(), Ordering::Release);
        }
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

/// One call of a script, built straight into the `EVALSHA` command that runs it: the keys are
/// given up front (their count precedes them on the wire), the arguments appended after, and
/// the buffers are sized once for a typical call, so building a call allocates twice.
///
/// A call may also be one plain Redis command that does the script's operation
/// ([`plain`](Self::plain)): it goes through the same engine (the dispatcher's order, replica
/// sync, settling a lost reply), is never batched, and needs no script loaded.
#[derive(Debug, Clone)]
pub struct ScriptCall {
    script: &'static Script,
    num_keys: usize,
    /// The words before the keys: `EVALSHA`, the digest and the key count (3), or the plain
    /// command's name (1).
    head: usize,
    cmd: redis::Cmd,
    /// A tracked call's flag: set to whether the connection armed tracking for its reads
    /// ([`tracked`](Self::tracked)).
    armed: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

/// Arguments a call is sized for up front (more only grow the buffers).
const TYPICAL_ARGS: usize = 8;
/// Bytes of arguments a call is sized for up front.
const TYPICAL_ARG_BYTES: usize = 128;

impl ScriptCall {
    /// A call of `script` with `keys` (`KEYS[1..]`); add its arguments with [`arg`](Self::arg).
    pub fn new(script: &'static Script, keys: &[&str]) -> Self {
        // "EVALSHA", the 40-char digest and the key count come first.
        Self::headed(script, keys, 3, 7 + 40 + 4, |cmd| {
            cmd.arg("EVALSHA").arg(script.sha1()).arg(keys.len());
        })
    }

    /// The operation of `script` done by the plain command `command` on `keys` (add its
    /// arguments with [`arg`](Self::arg)), for a first call that one command does as well as
    /// the script (the lean mutex's `SET key token NX PX lease`): Redis skips the script's
    /// run. `script` names the call in errors, metrics and replica sync (whether it
    /// [`writes`](Script::writes)); its reply is the command's, which the caller reads.
    pub fn plain(script: &'static Script, command: &'static str, keys: &[&str]) -> Self {
        Self::headed(script, keys, 1, command.len(), |cmd| {
            cmd.arg(command);
        })
    }

    /// A call whose command starts with `head` words (`head_bytes` long, written by
    /// `write_head`), then `keys`; its buffers sized once for a typical call.
    fn headed(
        script: &'static Script,
        keys: &[&str],
        head: usize,
        head_bytes: usize,
        write_head: impl FnOnce(&mut redis::Cmd),
    ) -> Self {
        let key_bytes: usize = keys.iter().map(|k| k.len()).sum();
        let mut cmd = redis::Cmd::with_capacity(
            head + keys.len() + TYPICAL_ARGS,
            head_bytes + key_bytes + TYPICAL_ARG_BYTES,
        );
        write_head(&mut cmd);
        for key in keys {
            cmd.arg(*key);
        }
        Self {
            script,
            num_keys: keys.len(),
            head,
            cmd,
            armed: None,
        }
    }

    /// This call, sent right behind the commands that make Redis tell the client's subscriber
    /// connection of the next change of every key it reads (`CLIENT CACHING yes`, on a
    /// connection tracking with `OPTIN`: [`ClientConfig::with_tracked_waits`](crate::ClientConfig::with_tracked_waits)), when the client can. `armed` is
    /// set to whether it did. A tracked call is never batched.
    #[must_use]
    pub fn tracked(mut self, armed: &std::sync::Arc<std::sync::atomic::AtomicBool>) -> Self {
        armed.store(false, std::sync::atomic::Ordering::Relaxed);
        self.armed = Some(armed.clone());
        self
    }

    /// A tracked call's flag ([`tracked`](Self::tracked)).
    pub(crate) fn armed(&self) -> Option<&std::sync::Arc<std::sync::atomic::AtomicBool>> {
        self.armed.as_ref()
    }

    /// Notes whether the connection armed tracking for this (tracked) call.
    pub(crate) fn set_armed(&self, armed: bool) {
        if let Some(flag) = &self.armed {
            flag.store(armed, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Whether the call is a plain command ([`plain`](Self::plain)), which is never batched.
    pub(crate) fn is_plain(&self) -> bool {
        self.head == 1
    }

    /// Whether the call goes alone, never in a batch: a plain command, or a tracked call (its
    /// arming must come right before it).
    pub(crate) fn goes_alone(&self) -> bool {
        self.is_plain() || self.armed.is_some()
    }

    /// Appends an argument (`ARGV[n]`).
    pub fn arg(mut self, arg: impl redis::ToRedisArgs) -> Self {
        self.cmd.arg(arg);
        self
    }

    /// The script the call runs.
    pub fn script(&self) -> &'static Script {
        self.script
    }

    /// The keys of the call.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.cmd
            .args_iter()
            .skip(self.head)
            .take(self.num_keys)
            .filter_map(|arg| match arg {
                redis::Arg::Simple(bytes) => std::str::from_utf8(bytes).ok(),
                _ => None,
            })
    }

    /// The call's keys and arguments, as they go on the wire.
    fn key_and_arg_bytes(&self) -> impl Iterator<Item = &[u8]> {
        self.cmd
            .args_iter()
            .skip(self.head)
            .filter_map(|arg| match arg {
                redis::Arg::Simple(bytes) => Some(bytes),
                _ => None,
            })
    }

    /// How many arguments (`ARGV`) the call has.
    fn num_args(&self) -> usize {
        self.cmd
            .args_iter()
            .count()
            .saturating_sub(self.head + self.num_keys)
    }

    /// The `EVALSHA` command of the call.
    pub(crate) fn command(&self) -> &redis::Cmd {
        &self.cmd
    }

    /// The call as `EVAL` with the script's source: for a server that does not have the
    /// script cached. It runs the call and caches the script in one round trip, and on a
    /// cluster it goes, by its keys, to the node that needs the script (a keyless `SCRIPT
    /// LOAD` would go to any node).
    pub(crate) fn eval_command(&self) -> redis::Cmd {
        if self.is_plain() {
            // A plain command never meets NOSCRIPT: it is sent as it is.
            return self.cmd.clone();
        }
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(self.script.source());
        for arg in self.cmd.args_iter().skip(2) {
            if let redis::Arg::Simple(bytes) = arg {
                cmd.arg(bytes);
            }
        }
        cmd
    }

    /// The shape of the call: its script, key count and argument count. Calls of one shape
    /// can share a batch.
    pub(crate) fn shape(&self) -> (*const Script, usize, usize) {
        (self.script, self.num_keys, self.num_args())
    }

    /// One call of the batch form of the calls' script, which runs each of `calls` (all of
    /// one [`shape`](Self::shape)) in turn and answers each one's reply ([`BATCH_DRIVER`]):
    /// `EVALSHA`, or `EVAL` of the batch form's source when `eval` is set.
    pub(crate) fn batch_command(calls: &[&ScriptCall], eval: bool) -> redis::Cmd {
        let Some(first) = calls.first() else {
            return redis::cmd("PING");
        };
        let (script, num_keys, num_args) = (first.script, first.num_keys, first.num_args());
        let bytes: usize = calls
            .iter()
            .flat_map(|c| c.key_and_arg_bytes())
            .map(<[u8]>::len)
            .sum();
        let mut cmd =
            redis::Cmd::with_capacity(6 + calls.len() * (num_keys + num_args), 64 + bytes);
        if eval {
            cmd.arg("EVAL").arg(script.batch_source());
        } else {
            cmd.arg("EVALSHA").arg(script.batch_sha1());
        }
        cmd.arg(calls.len() * num_keys);
        for call in calls {
            for key in call.key_and_arg_bytes().take(num_keys) {
                cmd.arg(key);
            }
        }
        cmd.arg(calls.len()).arg(num_keys).arg(num_args);
        for call in calls {
            for arg in call.key_and_arg_bytes().skip(num_keys) {
                cmd.arg(arg);
            }
        }
        cmd
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PRELUDE: &str = "-- a header\nlocal function a(x)\n  return x\nend\n\n-- b calls a\nlocal function b(x)\n  return a(x) + 1\nend\nlocal function c()\n  return 3\nend\n";

    #[test]
    fn a_script_carries_the_prelude_functions_it_calls_and_theirs() {
        let kept = used_functions(PRELUDE, "-- c() is not called here\nreturn b(1)");
        assert_eq!(
            kept,
            "local function a(x)\n  return x\nend\nlocal function b(x)\n  return a(x) + 1\nend\n"
        );
        assert_eq!(used_functions(PRELUDE, "return x.c() + y:b()"), "");
        assert_eq!(
            used_functions(PRELUDE, "return c() -- and a()"),
            "local function c()\n  return 3\nend\n"
        );
    }
}
