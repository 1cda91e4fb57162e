//! `ferrisson`: who holds what, from a shell. Every command but `force-unlock` and `delete`
//! only reads (through `Client::inspect` and `Client::list_objects`); the output's format is
//! documented in the crate's README.
// A command-line tool talks to its user on stdout and stderr.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::{Parser, Subcommand};
use ferrisson::{
    Client, ClientConfig, Error, Lock, ObjectInfo, ObjectKind, Party, ReentrantLock, Semaphore,
    SyncObject,
};
use futures::StreamExt;

mod render;

/// Who holds which ferrisson (or Redisson) lock, who waits, which permits are taken.
#[derive(Debug, Parser)]
#[command(name = "ferrisson", version, about, long_about = None)]
struct Cli {
    /// Where Redis is: redis://[user[:password]@]host:port[/db], rediss://…,
    /// redis-cluster://host:port,host:port or redis-sentinel://host:port,…/primary-name.
    #[arg(
        long,
        env = "REDIS_URL",
        default_value = "redis://127.0.0.1:6379",
        hide_env_values = true
    )]
    url: String,

    /// The password, when the URL has none (never echoed). `REDISCLI_AUTH` also works.
    #[arg(
        long = "password-env",
        default_value = "REDIS_PASSWORD",
        value_name = "VAR"
    )]
    password_env: String,

    /// The namespace prefix the applications configure (`ClientConfig::with_namespace`).
    #[arg(long, default_value = "")]
    namespace: String,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Every synchronizer object (SCAN, a page at a time; every primary of a cluster), with
    /// its kind and a one-line state.
    Ls {
        /// A glob pattern, as SCAN MATCH takes it.
        #[arg(default_value = "*")]
        pattern: String,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// The full state of one object: holders (app, host, pid of a ferrisson client; the
    /// client id of a Redisson one), lease left, waiters, permits, token.
    Show {
        name: String,
        /// The kind, where the layout alone cannot tell (a count: semaphore or latch).
        #[arg(long)]
        kind: Option<ObjectKind>,
        #[arg(long)]
        json: bool,
    },
    /// The state of one object, a line each time it changes, until interrupted: it looks again
    /// at once on each release message of the object, and every interval.
    Watch {
        name: String,
        #[arg(long)]
        kind: Option<ObjectKind>,
        /// How often to look besides the release messages, in milliseconds.
        #[arg(long, default_value_t = 500)]
        interval_ms: u64,
        #[arg(long)]
        json: bool,
    },
    /// Ends every hold of a lock now, whoever holds it (their guards are told at their next
    /// renewal). Asks first unless --yes.
    ForceUnlock {
        name: String,
        #[arg(long)]
        kind: Option<ObjectKind>,
        /// Do not ask.
        #[arg(long, short)]
        yes: bool,
    },
    /// Whether this deployment keeps ferrisson's guarantees (docs/guarantees.md), per
    /// guarantee and server: eviction, persistence, replication and failover, cluster slots,
    /// the server's version and Lua, this user's rights, round trips and the clock, each with
    /// why not and the fix. Reads only. Exits 0 when every guarantee holds (some perhaps
    /// weakened), 1 when one is broken, 2 when something could not be checked.
    Doctor {
        /// Check the rights of this ACL user (the account a service runs as) instead of the
        /// tool's own: needs `ACL DRYRUN` for the account the tool connects as.
        #[arg(long)]
        user: Option<String>,
        /// One JSON object: the worst verdict, the exit code and every finding.
        #[arg(long)]
        json: bool,
    },
    /// The wait-for graph across processes: every task a ferrisson client records as waiting
    /// (a wait is on record once it lasts a second, or a quarter of the deadlock detection's
    /// interval), what it holds, what it waits for and who holds that, and the cycles among
    /// them (deadlocks) with every process's app, host and pid. Reads only. Exits 0 when
    /// there is no cycle, 1 when there is one.
    Waits {
        /// One JSON object: the tasks and the cycles.
        #[arg(long)]
        json: bool,
    },
    /// Deletes a synchronizer and every key it keeps. Asks first unless --yes.
    Delete {
        name: String,
        #[arg(long)]
        kind: Option<ObjectKind>,
        #[arg(long, short)]
        yes: bool,
    },
}

/// What went wrong, for the user (exit code 1; 2 for a refusal), or an exit code of its own
/// (`doctor`'s verdict, its report printed already).
enum Failure {
    Error(String),
    Refused(String),
    Exit(u8),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Error(e.to_string())
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Error(message)) => {
            eprintln!("ferrisson: {message}");
            ExitCode::from(1)
        }
        Err(Failure::Refused(message)) => {
            eprintln!("ferrisson: {message}");
            ExitCode::from(2)
        }
        Err(Failure::Exit(code)) => ExitCode::from(code),
    }
}

async fn run(cli: Cli) -> Result<(), Failure> {
    let password = std::env::var(&cli.password_env)
        .ok()
        .or_else(|| std::env::var("REDISCLI_AUTH").ok())
        .filter(|p| !p.is_empty());
    if cfg!(not(feature = "tls")) && cli.url.starts_with("rediss://") {
        return Err(Failure::Error(
            "this ferrisson tool was built without TLS, so it cannot reach a rediss:// URL: \
             install it with `--features tls` (cargo install --path crates/ferrisson-cli --features tls)"
                .to_owned(),
        ));
    }
    let url = with_password(&cli.url, password.as_deref());
    let config: ClientConfig = url.parse()?;
    let connected = Client::with_config(
        config
            .with_namespace(cli.namespace.clone())
            .with_app_name("ferrisson-cli")
            // The tool holds nothing: it leaves no record of itself.
            .with_client_record(false)
            // `doctor` says it all; the other commands are not about the deployment.
            .with_deployment_warning(false),
    )
    .await;
    let client = match connected {
        Ok(client) => client,
        // The doctor's verdict: nothing could be checked.
        Err(e) if matches!(cli.command, Command::Doctor { .. }) => {
            eprintln!("ferrisson: the deployment could not be checked: {e}");
            return Err(Failure::Exit(2));
        }
        Err(e) => return Err(e.into()),
    };
    let result = match cli.command {
        Command::Ls { pattern, json } => ls(&client, &pattern, json).await,
        Command::Show { name, kind, json } => {
            let info = inspect_stored(&client, &name, kind).await?;
            print_line(&if json {
                render::json(&info).to_string()
            } else {
                render::show(&info)
            });
            Ok(())
        }
        Command::Watch {
            name,
            kind,
            interval_ms,
            json,
        } => watch(&client, &name, kind, interval_ms, json).await,
        Command::ForceUnlock { name, kind, yes } => force_unlock(&client, &name, kind, yes).await,
        Command::Delete { name, kind, yes } => delete(&client, &name, kind, yes).await,
        Command::Doctor { user, json } => doctor(&client, user.as_deref(), json).await,
        Command::Waits { json } => waits(&client, json).await,
    };
    let _ = client.shutdown().await;
    result
}

/// `doctor`: the report, and its exit code.
async fn doctor(client: &Client, user: Option<&str>, json: bool) -> Result<(), Failure> {
    let checked = match user {
        Some(user) => client.check_deployment_for(user).await,
        None => client.check_deployment().await,
    };
    let report = match checked {
        Ok(report) => report,
        Err(e) => {
            eprintln!("ferrisson: the deployment could not be checked: {e}");
            return Err(Failure::Exit(2));
        }
    };
    print_line(&if json {
        render::report_json(&report).to_string()
    } else {
        render::report(&report)
    });
    match report.exit_code() {
        0 => Ok(()),
        code => Err(Failure::Exit(code)),
    }
}

/// `waits`: the graph, exit 1 when it has a cycle.
async fn waits(client: &Client, json: bool) -> Result<(), Failure> {
    let graph = client.wait_graph().await?;
    print_line(&if json {
        render::waits_json(&graph).to_string()
    } else {
        render::waits(&graph)
    });
    if graph.cycles.is_empty() {
        Ok(())
    } else {
        Err(Failure::Exit(1))
    }
}

/// `url` with `password` put in when it has none.
fn with_password(url: &str, password: Option<&str>) -> String {
    let Some(password) = password else {
        return url.to_owned();
    };
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let encoded = percent_encode(password);
    // The authority's end: the last `@` before any path.
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) if rest[..at].contains(':') => url.to_owned(),
        Some(at) => format!("{scheme}://{}:{encoded}@{}", &rest[..at], &rest[at + 1..]),
        None => format!("{scheme}://:{encoded}@{rest}"),
    }
}

/// `s` with every byte but the unreserved characters of RFC 3986 percent-encoded.
fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// A line on stdout; a closed pipe (`| head`) ends the tool quietly.
fn print_line(line: &str) {
    let mut out = std::io::stdout().lock();
    if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
        std::process::exit(0);
    }
}

async fn inspect(
    client: &Client,
    name: &str,
    kind: Option<ObjectKind>,
) -> Result<ObjectInfo, Failure> {
    let info = match kind {
        Some(kind) => client.inspect_as(name, kind).await,
        None => client.inspect(name).await,
    };
    info.map_err(|e| match e {
        Error::WrongType { key } => Failure::Refused(format!(
            "`{key}` holds data of no synchronizer (or of another kind than asked)"
        )),
        Error::InvalidArgument(why) => Failure::Refused(why),
        e => e.into(),
    })
}

/// As [`inspect`], and refused (exit code 2) when nothing is stored under the name.
async fn inspect_stored(
    client: &Client,
    name: &str,
    kind: Option<ObjectKind>,
) -> Result<ObjectInfo, Failure> {
    let info = inspect(client, name, kind).await?;
    if info.kind.is_none() {
        return Err(Failure::Refused(format!(
            "nothing is stored under `{}` (key `{}`)",
            info.name, info.key
        )));
    }
    Ok(info)
}

async fn ls(client: &Client, pattern: &str, json: bool) -> Result<(), Failure> {
    let mut objects = std::pin::pin!(client.list_objects(pattern));
    while let Some(info) = objects.next().await {
        let info = info?;
        if json {
            print_line(&render::json(&info).to_string());
        } else {
            print_line(&format!("{}\t{}", info.name, info.summary()));
        }
    }
    Ok(())
}

async fn watch(
    client: &Client,
    name: &str,
    kind: Option<ObjectKind>,
    interval_ms: u64,
    json: bool,
) -> Result<(), Failure> {
    let interval = Duration::from_millis(interval_ms.max(10));
    let first = inspect_stored(client, name, kind).await?;
    // The object's release messages, on the client's subscriber connection (one server,
    // Sentinel or Cluster alike): each makes the watch look again at once, so a state that a
    // release ends is seen however short it was. A lost message costs a look delayed to the
    // interval.
    let changes = client.watch_changes(&first);
    changes.confirmed(Duration::from_secs(5)).await;
    // Read again once subscribed: nothing that happened meanwhile goes unseen.
    let own = |mut info: ObjectInfo| {
        // The watch's own subscriber connection is not among the subscribers it shows.
        if changes.is_watching() && info.kind.is_some() {
            info.subscribers = info.subscribers.map(|n| n.saturating_sub(1));
        }
        info
    };
    let mut info = own(inspect(client, name, kind).await?);
    let mut last: Option<String> = None;
    loop {
        // What changes the line: holders, waiters, counts; not the lease ticking down.
        let state = render::watch_state(&info);
        if last.as_deref() != Some(state.as_str()) {
            let line = if json {
                render::json(&info).to_string()
            } else {
                format!("{}  {}", clock(info.read_at), state)
            };
            print_line(&line);
            last = Some(state);
        }
        tokio::select! {
            _ = changes.changed(interval) => {}
            _ = tokio::signal::ctrl_c() => return Ok(()),
        }
        info = own(inspect(client, name, kind).await?);
    }
}

/// `HH:MM:SS.mmm` (UTC) of `at`.
fn clock(at: SystemTime) -> String {
    let ms = at
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    let day_ms = ms % 86_400_000;
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        day_ms / 3_600_000,
        day_ms / 60_000 % 60,
        day_ms / 1000 % 60,
        day_ms % 1000
    )
}

/// Asks `question` on the terminal; anything but `y`/`yes` (or no terminal) says no.
fn confirm(question: &str) -> Result<(), Failure> {
    if !std::io::stdin().is_terminal() {
        return Err(Failure::Refused(format!(
            "{question} Not without --yes (no terminal to ask on)"
        )));
    }
    eprint!("{question} [y/N] ");
    let mut answer = String::new();
    std::io::stdin()
        .read_line(&mut answer)
        .map_err(|e| Failure::Error(e.to_string()))?;
    match answer.trim() {
        "y" | "Y" | "yes" => Ok(()),
        _ => Err(Failure::Refused("nothing done".into())),
    }
}

/// Whose holds a force unlock ends, for the question.
fn holders_line(info: &ObjectInfo) -> String {
    let holders: Vec<String> = info
        .holders
        .iter()
        .map(|h| match &h.party {
            Party::Ferrisson(_) | Party::Unrecorded { .. } => h.party.describe(),
            _ => format!("owner {}", h.owner),
        })
        .collect();
    holders.join(", ")
}

/// What `force-unlock` and `delete` do to an object.
#[derive(Clone, Copy)]
enum Action {
    ForceUnlock,
    Delete,
}

/// `action` on the object `name` of `kind`, through its synchronizer's own handle: whether
/// there was something to do (`None`: the kind has no such action).
async fn act(
    client: &Client,
    name: &str,
    kind: ObjectKind,
    action: Action,
) -> Result<Option<bool>, Failure> {
    // A lock kind does both; any other synchronizer only deletes.
    macro_rules! on {
        (lock $handle:expr) => {{
            let handle = $handle?;
            match action {
                Action::ForceUnlock => handle.force_unlock().await?,
                Action::Delete => handle.delete().await?,
            }
        }};
        (object $handle:expr) => {{
            let handle = $handle?;
            match action {
                Action::ForceUnlock => return Ok(None),
                Action::Delete => handle.delete().await?,
            }
        }};
    }
    Ok(Some(match kind {
        ObjectKind::Lock => on!(lock ReentrantLock::new(client, name)),
        ObjectKind::Semaphore => on!(object Semaphore::new(client, name)),
        // A kind its own crate registered: its handle's calls, as the crate gave them.
        ObjectKind::Registered(kind) => match action {
            Action::ForceUnlock => match kind.force_unlock {
                Some(force_unlock) => force_unlock(client, name).await?,
                None => return Ok(None),
            },
            Action::Delete => (kind.delete)(client, name).await?,
        },
        _ => return Ok(None),
    }))
}

async fn force_unlock(
    client: &Client,
    name: &str,
    kind: Option<ObjectKind>,
    yes: bool,
) -> Result<(), Failure> {
    let info = inspect(client, name, kind).await?;
    let Some(kind) = info.kind else {
        return Err(Failure::Refused(format!(
            "nothing is stored under `{name}`"
        )));
    };
    if !kind.is_lock() {
        return Err(Failure::Refused(format!(
            "`{name}` is {} {kind}, not a lock: there is nothing to unlock (`ferrisson delete` removes it)",
            kind.article()
        )));
    }
    if !info.kind_certain && matches!(kind, ObjectKind::Registered(_)) {
        return Err(Failure::Refused(format!(
            "`{name}` holds data that may be anything's: pass --kind {kind} if it is {} {kind}",
            kind.article()
        )));
    }
    if info.holders.is_empty() {
        print_line(&format!("{name}: not held, nothing to do"));
        return Ok(());
    }
    if !yes {
        confirm(&format!(
            "Force-unlock {kind} `{name}` held by {}?",
            holders_line(&info)
        ))?;
    }
    let Some(unlocked) = act(client, name, kind, Action::ForceUnlock).await? else {
        return Err(Failure::Refused(format!(
            "force-unlocking {} {kind} is not supported",
            kind.article()
        )));
    };
    print_line(&if unlocked {
        format!("{name}: unlocked (the holders' guards report the loss at their next renewal)")
    } else {
        format!("{name}: it was released meanwhile, nothing to do")
    });
    Ok(())
}

async fn delete(
    client: &Client,
    name: &str,
    kind: Option<ObjectKind>,
    yes: bool,
) -> Result<(), Failure> {
    let info = inspect(client, name, kind).await?;
    let Some(kind) = info.kind else {
        return Err(Failure::Refused(format!(
            "nothing is stored under `{name}`"
        )));
    };
    if !info.kind_certain {
        return Err(Failure::Refused(format!(
            "`{name}` looks like {} {kind}, but its layout does not say for sure: pass --kind",
            kind.article()
        )));
    }
    if !yes {
        confirm(&format!("Delete {kind} `{name}` ({})?", info.summary()))?;
    }
    let Some(deleted) = act(client, name, kind, Action::Delete).await? else {
        return Err(Failure::Refused(format!(
            "deleting {} {kind} is not supported",
            kind.article()
        )));
    };
    print_line(&if deleted {
        format!("{name}: deleted")
    } else {
        format!("{name}: it was gone already")
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_from_the_environment_goes_into_every_url_form() {
        assert_eq!(
            with_password("redis://h:1/2", Some("p@ss word")),
            "redis://:p%40ss%20word@h:1/2"
        );
        assert_eq!(
            with_password("redis://app@h:1", Some("pw")),
            "redis://app:pw@h:1"
        );
        assert_eq!(
            with_password("redis://u:own@h:1", Some("pw")),
            "redis://u:own@h:1"
        );
        assert_eq!(
            with_password("redis-cluster://h:1,h:2", Some("pw")),
            "redis-cluster://:pw@h:1,h:2"
        );
        assert_eq!(
            with_password("redis-sentinel://s:1/main", Some("pw")),
            "redis-sentinel://:pw@s:1/main"
        );
        assert_eq!(with_password("redis://h:1", None), "redis://h:1");
    }
}
