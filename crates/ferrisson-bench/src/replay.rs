//! Pairs of commands replayed from a file kept outside the repository: how `server-cost`
//! measures a peer's own scripts (Redisson's) beside ferrisson's, driven the same way, without
//! this repository carrying their code (`--replay FILE`; docs/benchmarks.md, "Replaying
//! Redisson's scripts").
//!
//! The file is JSON:
//!
//! ```json
//! {
//!   "source": "where the scripts come from (shown in the report)",
//!   "scripts": { "acquire": "<lua>", "release": "<lua>" },
//!   "pairs": [
//!     { "kind": "reentrant-lock", "label": "redisson",
//!       "setup": [["SET", "{name}", "1"]],
//!       "calls": [["EVALSHA", "$acquire", "1", "{name}", "30000", "owner:1"],
//!                 ["EVALSHA", "$release", "1", "{name}", "{hex}"]] }
//!   ]
//! }
//! ```
//!
//! `kind` names the `server-cost` kind the pair is measured beside, and `label` the library it
//! stands for; the label `redisson` is the kind's budget base. In `setup` (run once per object)
//! and `calls` (one acquire + release pair), an argument that is exactly `$<script>` becomes
//! that script's SHA-1 (loaded with `SCRIPT LOAD` first), and these placeholders are replaced
//! anywhere in an argument: `{name}` the object's name, `{n}` the pair's number (unique across
//! the slice), `{hex}` that number as 32 hex digits, `{now}` the local clock in milliseconds,
//! `{deadline}` that plus 30 s. An argument that is exactly `{bin16}` is the pair's number as
//! 16 raw bytes (a permit id).
//!
//! A pair may list `expect`, one pattern per call, matched against the reply as text (`nil`, an
//! integer, a string, `[a,b]` for an array; `*` matches any run of characters): a replayed
//! acquire that did not take would otherwise cost less and pass unseen. The first pair of
//! every task is checked.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Deserialize;

use crate::workload::{BoxFuture, Cycle};

#[derive(Deserialize)]
struct File {
    source: String,
    scripts: BTreeMap<String, String>,
    pairs: Vec<PairSpec>,
}

#[derive(Deserialize)]
struct PairSpec {
    kind: String,
    label: String,
    #[serde(default)]
    setup: Vec<Vec<String>>,
    calls: Vec<Vec<String>>,
    #[serde(default)]
    expect: Vec<String>,
}

/// One argument of a replayed command.
#[derive(Clone, Debug)]
enum Arg {
    /// Literal bytes, after the script references are resolved.
    Text(String),
    /// Text with placeholders.
    Template(String),
    Bin16,
}

type Command = Vec<Arg>;

/// A replay file, parsed and checked.
pub struct Replay {
    pub source: String,
    scripts: BTreeMap<String, String>,
    pairs: Vec<Pair>,
}

/// One kind's replayed pair.
#[derive(Clone)]
pub struct Pair {
    pub kind: String,
    pub label: String,
    setup: Arc<Vec<Command>>,
    calls: Arc<Vec<Command>>,
    expect: Arc<Vec<String>>,
}

fn parse_command(words: &[String], scripts: &BTreeMap<String, String>) -> Result<Command, String> {
    if words.is_empty() {
        return Err("an empty command".into());
    }
    words
        .iter()
        .map(|w| {
            if let Some(script) = w.strip_prefix('$') {
                if !scripts.contains_key(script) {
                    return Err(format!("`{w}` names no script of the file"));
                }
                // Resolved to its SHA-1 when the scripts are loaded.
                Ok(Arg::Text(w.clone()))
            } else if w == "{bin16}" {
                Ok(Arg::Bin16)
            } else if w.contains('{') {
                Ok(Arg::Template(w.clone()))
            } else {
                Ok(Arg::Text(w.clone()))
            }
        })
        .collect()
}

impl Replay {
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the replay file {}: {e}", path.display()))?;
        let file: File = serde_json::from_str(&text)
            .map_err(|e| format!("the replay file {} is not valid: {e}", path.display()))?;
        let mut pairs = Vec::new();
        for spec in file.pairs {
            let parse = |cmds: &[Vec<String>]| -> Result<Vec<Command>, String> {
                cmds.iter()
                    .map(|c| parse_command(c, &file.scripts))
                    .collect::<Result<_, _>>()
                    .map_err(|e| format!("{} ({}): {e}", spec.kind, spec.label))
            };
            if spec.calls.is_empty() {
                return Err(format!("{} ({}): no calls", spec.kind, spec.label));
            }
            if !spec.expect.is_empty() && spec.expect.len() != spec.calls.len() {
                return Err(format!(
                    "{} ({}): `expect` needs one pattern per call",
                    spec.kind, spec.label
                ));
            }
            pairs.push(Pair {
                expect: Arc::new(spec.expect),
                setup: Arc::new(parse(&spec.setup)?),
                calls: Arc::new(parse(&spec.calls)?),
                kind: spec.kind,
                label: spec.label,
            });
        }
        Ok(Self {
            source: file.source,
            scripts: file.scripts,
            pairs,
        })
    }

    /// Loads the scripts into the server and returns the pairs with `$<script>` resolved.
    pub async fn load_scripts(
        &self,
        con: &mut redis::aio::MultiplexedConnection,
    ) -> Result<Vec<Pair>, String> {
        let mut shas = BTreeMap::new();
        for (name, source) in &self.scripts {
            let sha: String = redis::cmd("SCRIPT")
                .arg("LOAD")
                .arg(source)
                .query_async(con)
                .await
                .map_err(|e| format!("script `{name}` of the replay file: {e}"))?;
            shas.insert(format!("${name}"), sha);
        }
        let resolve = |cmds: &[Command]| -> Vec<Command> {
            cmds.iter()
                .map(|c| {
                    c.iter()
                        .map(|a| match a {
                            Arg::Text(t) => Arg::Text(shas.get(t).cloned().unwrap_or(t.clone())),
                            other => other.clone(),
                        })
                        .collect()
                })
                .collect()
        };
        Ok(self
            .pairs
            .iter()
            .map(|p| Pair {
                kind: p.kind.clone(),
                label: p.label.clone(),
                setup: Arc::new(resolve(&p.setup)),
                calls: Arc::new(resolve(&p.calls)),
                expect: p.expect.clone(),
            })
            .collect())
    }
}

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

fn build(command: &Command, name: &str, n: u64) -> redis::Cmd {
    let mut cmd = redis::Cmd::new();
    for arg in command {
        match arg {
            Arg::Text(t) => {
                cmd.arg(t.as_str());
            }
            Arg::Bin16 => {
                cmd.arg(u128::from(n).to_be_bytes().as_slice());
            }
            Arg::Template(t) => {
                let now = now_ms();
                let text = t
                    .replace("{name}", name)
                    .replace("{n}", &n.to_string())
                    .replace("{hex}", &format!("{n:032x}"))
                    .replace("{deadline}", &(now + 30_000).to_string())
                    .replace("{now}", &now.to_string());
                cmd.arg(text);
            }
        }
    }
    cmd
}

/// A reply as the `expect` patterns see it.
fn render(v: &redis::Value) -> String {
    use redis::Value;
    match v {
        Value::Nil => "nil".into(),
        Value::Int(i) => i.to_string(),
        Value::Okay => "OK".into(),
        Value::SimpleString(s) => s.clone(),
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::Array(items) | Value::Set(items) => {
            let inner: Vec<String> = items.iter().map(render).collect();
            format!("[{}]", inner.join(","))
        }
        other => format!("{other:?}"),
    }
}

/// Whether `text` matches `pattern`, where `*` matches any run of characters.
fn matches(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let Some(first) = parts.next() else {
        return true;
    };
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    for (i, part) in parts.iter().enumerate() {
        if i + 1 == parts.len() {
            return rest.ends_with(part);
        }
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.is_empty()
}

async fn send(
    con: &mut redis::aio::MultiplexedConnection,
    command: &Command,
    name: &str,
    n: u64,
) -> Result<redis::Value, String> {
    match build(command, name, n)
        .query_async::<redis::Value>(con)
        .await
    {
        Ok(redis::Value::ServerError(e)) => Err(format!("replayed call: {e:?}")),
        Ok(v) => Ok(v),
        Err(e) => Err(format!("replayed call: {e}")),
    }
}

/// One task's replayed pairs on an object of its own.
pub struct ReplayCycle {
    con: redis::aio::MultiplexedConnection,
    name: String,
    calls: Arc<Vec<Command>>,
    expect: Arc<Vec<String>>,
    /// This task's next pair number: unique across the tasks of a slice (`task << 32 | i`).
    next: AtomicU64,
}

impl ReplayCycle {
    /// Runs the pair's setup on `name` and returns its cycle.
    pub async fn new(
        pair: &Pair,
        mut con: redis::aio::MultiplexedConnection,
        name: String,
        task: u32,
    ) -> Result<Self, String> {
        for command in pair.setup.iter() {
            send(&mut con, command, &name, 0).await?;
        }
        Ok(Self {
            con,
            name,
            calls: pair.calls.clone(),
            expect: pair.expect.clone(),
            next: AtomicU64::new(u64::from(task) << 32),
        })
    }
}

impl Cycle for ReplayCycle {
    fn cycle(&self, _hold: Duration) -> BoxFuture<'_, Result<Duration, String>> {
        Box::pin(async move {
            let n = self.next.fetch_add(1, Ordering::Relaxed);
            let mut con = self.con.clone();
            let first = n & 0xffff_ffff == 0;
            for (i, command) in self.calls.iter().enumerate() {
                let reply = send(&mut con, command, &self.name, n).await?;
                if let Some(pattern) = self.expect.get(i).filter(|_| first) {
                    let got = render(&reply);
                    if !matches(pattern, &got) {
                        return Err(format!(
                            "replayed call {} on {} answered `{got}`, expected `{pattern}`",
                            i + 1,
                            self.name
                        ));
                    }
                }
            }
            Ok(Duration::ZERO)
        })
    }
}
