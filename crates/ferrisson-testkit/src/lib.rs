//! Test support for ferrisson: throwaway `redis-server` instances on free loopback ports.
//!
//! Every test that needs Redis gets a real server, never a mock:
//!
//! - [`RedisServer::spawn`] starts `redis-server` on a free loopback port with persistence off
//!   and its log in a temp dir, and kills it on drop. It can be stopped, restarted on the same
//!   port, paused and resumed. It runs on one of two backends, chosen by
//!   `FERRISSON_TEST_BACKEND`:
//!   - `process`: a local binary (`REDIS_SERVER_BIN`, the `PATH`, or `/usr/bin`);
//!   - `docker` (feature `docker`, on by default): a container of `FERRISSON_TEST_REDIS_IMAGE`
//!     (default `redis:7`) through testcontainers' async runner, on the host's network so that
//!     it listens on the same loopback port, frozen with `docker pause`;
//!   - unset: a local binary when there is one, else Docker.
//! - [`TestRedis::any`] is for tests that only need *some* server: the one at `REDIS_URL` when
//!   that is set, else a started one.
//!
//! With neither backend and no `REDIS_URL` these panic with instructions: a test that cannot
//! reach a server fails, it never passes silently.

mod cluster;
#[cfg(feature = "docker")]
pub mod docker;
mod docs;
mod names;
mod proxy;
mod sentinel;
mod stats;
mod tls;
pub use cluster::RedisCluster;
pub use docs::{fenced_code, marked_section};
pub use names::{redisson_name, rerun_test_as_process, unique_name, worker_env};
pub use proxy::FaultProxy;
pub use sentinel::RedisSentinel;
pub use stats::{
    calls_between, command_calls, count_subscriber_connections, parse_command_calls, total_calls,
};
pub use tls::{OPENSSL_INSTRUCTIONS, TestCerts};

use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What to do when no server can be had.
pub const INSTRUCTIONS: &str = "no Redis server for the tests: install one \
(`apt-get install -y redis-server redis-tools` on Debian/Ubuntu, `brew install redis` on macOS), \
or point REDIS_SERVER_BIN at a redis-server binary, or set REDIS_URL=redis://host:port \
for tests that only need some server";

/// Where servers run: local `redis-server` processes, or containers.
#[derive(Debug, Clone)]
enum Backend {
    Process(PathBuf),
    #[cfg(feature = "docker")]
    Docker,
}

/// A running server: a child process or a container.
#[derive(Debug)]
enum Running {
    Process(Child),
    #[cfg(feature = "docker")]
    Container(docker::Container),
}

/// The backend `FERRISSON_TEST_BACKEND` names (`process` or `docker`); when it is unset, a
/// local `redis-server` binary if there is one, else Docker.
fn backend() -> Result<Backend, String> {
    let chosen = std::env::var("FERRISSON_TEST_BACKEND").unwrap_or_default();
    match chosen.as_str() {
        "process" => find_binary()
            .map(Backend::Process)
            .ok_or_else(|| INSTRUCTIONS.to_owned()),
        #[cfg(feature = "docker")]
        "docker" => Ok(Backend::Docker),
        #[cfg(not(feature = "docker"))]
        "docker" => Err(
            "FERRISSON_TEST_BACKEND=docker, but the testkit was built without its `docker` feature"
                .to_owned(),
        ),
        "" => match find_binary() {
            Some(binary) => Ok(Backend::Process(binary)),
            #[cfg(feature = "docker")]
            None => Ok(Backend::Docker),
            #[cfg(not(feature = "docker"))]
            None => Err(INSTRUCTIONS.to_owned()),
        },
        other => Err(format!(
            "FERRISSON_TEST_BACKEND={other}: expected `process` or `docker` (or unset: a local redis-server, else Docker)"
        )),
    }
}

/// How long a spawned server may take to answer its first PING.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// A `redis-server` child process on a loopback port, killed on drop.
#[derive(Debug)]
pub struct RedisServer {
    backend: Backend,
    port: u16,
    dir: tempfile::TempDir,
    child: Option<Running>,
    /// Further `redis-server` arguments (a cluster node's, for example).
    args: Vec<String>,
    /// A sentinel's configuration: then the server runs as a sentinel (`--sentinel`) from a
    /// `sentinel.conf` with these lines, which it rewrites as it learns.
    sentinel_conf: Option<String>,
    /// The TLS port, when the server also listens for TLS ([`RedisServer::try_spawn_tls`]).
    tls_port: Option<u16>,
    /// The server's ports, held for as long as it lives, stopped or running ([`PortLease`]).
    _ports: Vec<PortLease>,
}

/// Finds the `redis-server` binary: `REDIS_SERVER_BIN`, the `PATH`, then the usual places.
pub fn find_binary() -> Option<PathBuf> {
    ferrisson_dev::find_redis_server()
}

/// The major version of the `redis-server` at `binary` (`redis-server --version`), once per
/// binary.
fn major_version(binary: &Path) -> Option<u32> {
    static VERSIONS: std::sync::Mutex<Vec<(PathBuf, Option<u32>)>> =
        std::sync::Mutex::new(Vec::new());
    let mut versions = VERSIONS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, version)) = versions.iter().find(|(b, _)| b == binary) {
        return *version;
    }
    let version = Command::new(binary)
        .arg("--version")
        .output()
        .ok()
        .and_then(|out| {
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            let v = text.split("v=").nth(1)?;
            v.split('.').next()?.parse().ok()
        });
    versions.push((binary.to_owned(), version));
    version
}

fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A loopback port held for one server of this process for as long as the server lives,
/// running or stopped: an exclusive lock on a file named after the port, in a directory every
/// test process shares (the lock goes with the process). Tests run side by side, each in a
/// process of its own, and a server stopped by one (a killed cluster node, a primary a
/// sentinel fails over from) is still known to its cluster or its sentinels: were another test
/// to start a server on its port, they would take that server in (two clusters merged into
/// one, a sentinel reconfiguring another test's server). The lease also holds the cluster bus
/// port (`port + 10000`), which a cluster node listens on too.
#[derive(Debug)]
struct PortLease {
    _locks: Vec<std::fs::File>,
}

/// A free loopback port no live server of any test holds, with its lease.
fn leased_port() -> Result<(u16, PortLease), String> {
    let dir = std::env::temp_dir().join("ferrisson-test-ports");
    std::fs::create_dir_all(&dir)
        .map_err(|e| format!("cannot make the port lock dir {}: {e}", dir.display()))?;
    let lock = |port: u16| -> Option<std::fs::File> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(port.to_string()))
            .ok()?;
        file.try_lock().ok()?;
        Some(file)
    };
    for _ in 0..64 {
        let port = free_port().map_err(|e| format!("cannot find a free port: {e}"))?;
        // A cluster node's bus port must fit too.
        let Some(bus) = port.checked_add(10_000) else {
            continue;
        };
        if let (Some(own), Some(bus)) = (lock(port), lock(bus)) {
            return Ok((
                port,
                PortLease {
                    _locks: vec![own, bus],
                },
            ));
        }
    }
    Err("cannot find a free loopback port that no other test's server holds".to_owned())
}

impl RedisServer {
    /// Starts a server, panicking with the server log or with [`INSTRUCTIONS`] when it cannot.
    #[allow(clippy::panic)]
    pub fn spawn() -> Self {
        match Self::try_spawn() {
            Ok(server) => server,
            Err(e) => panic!("{e}"),
        }
    }

    /// The server `REDIS_URL` names, or a throwaway one started here (kept alive by the
    /// returned `Some`): what the examples and the benchmark harness run against.
    ///
    /// # Errors
    ///
    /// As [`try_spawn`](Self::try_spawn), when `REDIS_URL` is unset or empty.
    pub fn from_env_or_spawn() -> Result<(Option<Self>, String), String> {
        match std::env::var("REDIS_URL") {
            Ok(url) if !url.is_empty() => Ok((None, url)),
            _ => {
                let server = Self::try_spawn()?;
                let url = server.url();
                Ok((Some(server), url))
            }
        }
    }

    /// Starts a server on a free loopback port.
    ///
    /// # Errors
    ///
    /// A message naming what went wrong (no binary: [`INSTRUCTIONS`]; a failed start: the log).
    pub fn try_spawn() -> Result<Self, String> {
        Self::try_spawn_with(&[])
    }

    /// Starts a server on a free loopback port with further `redis-server` arguments.
    ///
    /// # Errors
    ///
    /// As [`try_spawn`](Self::try_spawn).
    pub fn try_spawn_with(args: &[&str]) -> Result<Self, String> {
        Self::try_spawn_inner(args, None)
    }

    /// Starts a sentinel (`redis-server sentinel.conf --sentinel`) on a free loopback port,
    /// its `sentinel.conf` made of `conf` (one directive a line).
    ///
    /// # Errors
    ///
    /// As [`try_spawn`](Self::try_spawn).
    pub fn try_spawn_sentinel(conf: &str) -> Result<Self, String> {
        Self::try_spawn_inner(&[], Some(conf.to_owned()))
    }

    /// Starts a server that also listens for TLS on a free loopback port
    /// ([`tls_url`](Self::tls_url)), presenting the server certificate of `certs` and trusting their CA
    /// for client certificates, which it requires when `client_certificates` is set. The plain
    /// port stays open (the harness checks the server is up through it).
    ///
    /// # Errors
    ///
    /// As [`try_spawn`](Self::try_spawn).
    pub fn try_spawn_tls(certs: &TestCerts, client_certificates: bool) -> Result<Self, String> {
        let (port, lease) = leased_port()?;
        let path = |f: &str| certs.path(f).to_string_lossy().into_owned();
        let (cert, key, ca) = (path("server.crt"), path("server.key"), path("ca.crt"));
        let port_arg = port.to_string();
        let args = [
            "--tls-port",
            &port_arg,
            "--tls-cert-file",
            &cert,
            "--tls-key-file",
            &key,
            "--tls-ca-cert-file",
            &ca,
            "--tls-auth-clients",
            if client_certificates { "yes" } else { "no" },
        ];
        let mut server = Self::try_spawn_inner(&args, None)?;
        server.tls_port = Some(port);
        server._ports.push(lease);
        Ok(server)
    }

    /// `rediss://localhost:<tls port>` for a server started by
    /// [`try_spawn_tls`](Self::try_spawn_tls) (`localhost`, the name its certificate bears),
    /// else `None`.
    pub fn tls_url(&self) -> Option<String> {
        self.tls_port
            .map(|port| format!("rediss://localhost:{port}"))
    }

    fn try_spawn_inner(args: &[&str], sentinel_conf: Option<String>) -> Result<Self, String> {
        let backend = backend()?;
        let dir = tempfile::tempdir().map_err(|e| format!("cannot make a temp dir: {e}"))?;
        let mut last_error = String::new();
        // Another process can take the free port between our probe and the server's bind.
        for _ in 0..8 {
            let (port, lease) = leased_port()?;
            let mut server = Self {
                backend: backend.clone(),
                port,
                dir: tempfile::tempdir().map_err(|e| format!("cannot make a temp dir: {e}"))?,
                child: None,
                args: args.iter().map(|a| (*a).to_owned()).collect(),
                sentinel_conf: sentinel_conf.clone(),
                tls_port: None,
                _ports: vec![lease],
            };
            match server.start_process() {
                Ok(()) => return Ok(server),
                Err(e) => last_error = e,
            }
        }
        drop(dir);
        Err(last_error)
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("redis.log")
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// The server's command line (after `redis-server`).
    fn command_line(&self) -> Result<Vec<String>, String> {
        let mut args: Vec<String> = Vec::new();
        if let Some(conf) = &self.sentinel_conf {
            let path = self.dir.path().join("sentinel.conf");
            // Written once: a sentinel restarted keeps what it learnt.
            if !path.exists() {
                std::fs::write(&path, format!("{conf}\n"))
                    .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            }
            args.push(path.to_string_lossy().into_owned());
            args.push("--sentinel".into());
        } else if self.major_version() >= Some(7) {
            // DEBUG SLEEP and friends, from loopback connections (Redis 7 refuses them by
            // default; older servers allow them and do not know the option).
            args.extend(["--enable-debug-command".into(), "local".into()]);
        }
        args.extend(["--port".into(), self.port.to_string()]);
        args.extend(["--bind".into(), "127.0.0.1".into()]);
        if self.sentinel_conf.is_none() {
            // A replica syncs at once (the default waits 5 s for more replicas to come).
            for arg in [
                "--save",
                "",
                "--appendonly",
                "no",
                "--repl-diskless-sync-delay",
                "0",
            ] {
                args.push(arg.into());
            }
        }
        args.extend(["--protected-mode".into(), "no".into()]);
        args.extend(["--daemonize".into(), "no".into()]);
        args.push("--dir".into());
        args.push(self.dir.path().to_string_lossy().into_owned());
        args.push("--logfile".into());
        args.push(self.log_path().to_string_lossy().into_owned());
        args.extend(self.args.iter().cloned());
        Ok(args)
    }

    fn major_version(&self) -> Option<u32> {
        match &self.backend {
            Backend::Process(binary) => major_version(binary),
            #[cfg(feature = "docker")]
            Backend::Docker => Some(docker::image_major_version()),
        }
    }

    fn start_process(&mut self) -> Result<(), String> {
        let _ = std::fs::remove_file(self.log_path());
        let args = self.command_line()?;
        self.child = Some(match &self.backend {
            Backend::Process(binary) => Running::Process(
                Command::new(binary)
                    .args(&args)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .map_err(|e| format!("cannot run {}: {e}\n{INSTRUCTIONS}", binary.display()))?,
            ),
            #[cfg(feature = "docker")]
            Backend::Docker => Running::Container(docker::Container::run(args, self.dir.path())?),
        });
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if self.ping() {
                return Ok(());
            }
            if let Some(Running::Process(child)) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                let mut stderr = String::new();
                if let Some(mut pipe) = child.stderr.take() {
                    let _ = pipe.read_to_string(&mut stderr);
                }
                self.child = None;
                return Err(format!(
                    "redis-server on port {} exited with {status}\nstderr: {stderr}\nlog:\n{}",
                    self.port,
                    self.log()
                ));
            }
            if Instant::now() > deadline {
                self.kill();
                return Err(format!(
                    "redis-server on port {} did not answer within {START_TIMEOUT:?}\nlog:\n{}",
                    self.port,
                    self.log()
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn ping(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
        use std::io::Write;
        if stream.write_all(b"PING\r\n").is_err() {
            return false;
        }
        let mut reply = [0u8; 7];
        stream.read_exact(&mut reply).is_ok() && &reply == b"+PONG\r\n"
    }

    fn kill(&mut self) {
        match self.child.take() {
            Some(Running::Process(mut child)) => {
                let _ = child.kill();
                let _ = child.wait();
            }
            // Dropping a container removes it at once (`docker rm -f`).
            #[cfg(feature = "docker")]
            Some(Running::Container(container)) => drop(container),
            None => {}
        }
    }

    /// The loopback port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The process id while running as a local process (`None` in a container).
    pub fn pid(&self) -> Option<u32> {
        match &self.child {
            Some(Running::Process(child)) => Some(child.id()),
            _ => None,
        }
    }

    /// Whether the server process is running.
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Kills the server (SIGKILL, like a crash: with persistence off, all data is gone).
    pub fn stop(&mut self) {
        self.kill();
    }

    /// Starts the server again on the same port (after [`stop`](Self::stop)).
    #[allow(clippy::panic)]
    pub fn start(&mut self) {
        if self.child.is_some() {
            return;
        }
        if let Err(e) = self.start_process() {
            panic!("restarting redis-server: {e}");
        }
    }

    /// Stops and starts the server: every key, client and subscription is gone (a restart
    /// without persistence).
    pub fn restart(&mut self) {
        self.stop();
        let _ = std::fs::remove_file(self.dir.path().join("dump.rdb"));
        self.start();
    }

    /// `SAVE`s a snapshot, kills the server (SIGKILL) and starts it again from the snapshot:
    /// a restart with persistence. Clients and subscriptions are gone, the keys are back.
    #[allow(clippy::panic)]
    pub fn restart_persisted(&mut self) {
        let mut con = self.connection();
        // No write lands between the snapshot and the kill: paused writes are never run, and
        // their clients see the connection drop.
        let _: redis::RedisResult<()> = redis::cmd("CLIENT")
            .arg("PAUSE")
            .arg(10_000)
            .arg("WRITE")
            .query(&mut con);
        let saved: redis::RedisResult<()> = redis::cmd("SAVE").query(&mut con);
        if let Err(e) = saved {
            panic!("SAVE before a persisted restart failed: {e}");
        }
        self.stop();
        self.start();
    }

    /// Freezes the server (SIGSTOP to the process, `docker pause` of a container):
    /// connections stay open, nothing is answered.
    pub fn pause(&self) {
        self.freeze(true);
    }

    /// Thaws a paused server (SIGCONT, `docker unpause`).
    pub fn resume(&self) {
        self.freeze(false);
    }

    /// Freezes the server now and thaws it after `pause` from a thread of its own (the caller
    /// goes on meanwhile); join the handle to wait for the thaw.
    #[allow(clippy::panic)]
    pub fn freeze_for(&self, pause: Duration) -> std::thread::JoinHandle<()> {
        self.pause();
        let thaw: Box<dyn FnOnce() + Send> = match &self.child {
            Some(Running::Process(child)) => {
                let pid = child.id();
                Box::new(move || signal_process(pid, "-CONT"))
            }
            #[cfg(feature = "docker")]
            Some(Running::Container(container)) => {
                let handle = container.thaw_handle();
                Box::new(move || {
                    if let Err(e) = handle.thaw() {
                        panic!("docker unpause failed: {e}");
                    }
                })
            }
            None => panic!("redis-server is not running"),
        };
        std::thread::spawn(move || {
            std::thread::sleep(pause);
            thaw();
        })
    }

    #[allow(clippy::panic)]
    fn freeze(&self, frozen: bool) {
        match &self.child {
            Some(Running::Process(child)) => {
                signal_process(child.id(), if frozen { "-STOP" } else { "-CONT" });
            }
            #[cfg(feature = "docker")]
            Some(Running::Container(container)) => {
                let done = if frozen {
                    container.pause()
                } else {
                    container.unpause()
                };
                if let Err(e) = done {
                    panic!("docker (un)pause failed: {e}");
                }
            }
            None => panic!("redis-server is not running"),
        }
    }

    /// A plain (synchronous) connection for test set-up and inspection.
    #[allow(clippy::panic)]
    pub fn connection(&self) -> redis::Connection {
        connect(&self.url())
    }

    /// `SCRIPT FLUSH`: the next `EVALSHA` of every script answers `NOSCRIPT`.
    pub fn flush_scripts(&self) {
        let mut con = self.connection();
        let _: () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query(&mut con)
            .unwrap_or(());
    }

    /// The data directory (the log lives there).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        // A paused server would ignore SIGKILL only until resumed; SIGKILL works on stopped
        // processes, so kill directly.
        self.kill();
    }
}

/// Sends `signal` (`"-STOP"`, `"-CONT"`, `"-KILL"`, ...) to process `pid`: freezing and thawing
/// a client process as well as a server.
///
/// # Panics
///
/// When the signal cannot be sent (no such process).
#[allow(clippy::panic)]
pub fn signal_process(pid: u32, signal: &str) {
    // The shell's built-in `kill`: no procps package needed.
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!("kill {signal} {pid}"))
        .status();
    if !status.is_ok_and(|s| s.success()) {
        panic!("kill {signal} {pid} failed");
    }
}

#[allow(clippy::panic)]
fn connect(url: &str) -> redis::Connection {
    redis::Client::open(url)
        .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(5)))
        .unwrap_or_else(|e| panic!("cannot connect to {url}: {e}\n{INSTRUCTIONS}"))
}

/// Some Redis server for a test: an external one, or one started for it (a local process or
/// a container, per `FERRISSON_TEST_BACKEND`).
#[derive(Debug)]
pub enum TestRedis {
    /// The server at `REDIS_URL`; tests must use keys of their own on it.
    External(String),
    /// A server started for this test.
    Spawned(RedisServer),
}

impl TestRedis {
    /// The server at `REDIS_URL` when set; else one started on the backend
    /// `FERRISSON_TEST_BACKEND` names (a local `redis-server` when unset, else a container).
    /// Panics with instructions when none can be had.
    pub fn any() -> Self {
        match std::env::var("REDIS_URL") {
            Ok(url) if !url.is_empty() => TestRedis::External(url),
            _ => TestRedis::Spawned(RedisServer::spawn()),
        }
    }

    /// The server's URL.
    pub fn url(&self) -> String {
        match self {
            TestRedis::External(url) => url.clone(),
            TestRedis::Spawned(server) => server.url(),
        }
    }

    /// A plain (synchronous) connection for test set-up and inspection.
    pub fn connection(&self) -> redis::Connection {
        connect(&self.url())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spawned_server_answers_and_restarts_on_the_same_port() {
        let mut server = RedisServer::spawn();
        let port = server.port();
        let mut con = server.connection();
        let _: () = redis::cmd("SET")
            .arg("k")
            .arg("v")
            .query(&mut con)
            .expect("set");
        server.restart();
        assert_eq!(server.port(), port);
        let mut con = server.connection();
        let v: Option<String> = redis::cmd("GET").arg("k").query(&mut con).expect("get");
        assert_eq!(v, None, "persistence is off: a restart loses the data");
    }

    #[test]
    fn a_local_cluster_forms_with_three_primaries_and_spreads_names() {
        let cluster = RedisCluster::spawn();
        assert_eq!(cluster.nodes().len(), 6);
        assert_eq!(cluster.primary_ports().len(), 3, "three primaries");
        // Names without a hash tag land on different primaries; derived keys stay with theirs.
        let owners: std::collections::BTreeSet<u16> = (0..30)
            .map(|i| cluster.primary_for(&format!("lock-{i}")).port())
            .collect();
        assert_eq!(owners.len(), 3, "names spread over every primary");
        for i in 0..30 {
            let name = format!("lock-{i}");
            assert_eq!(
                cluster.slot_of(&name),
                cluster.slot_of(&format!("redisson_lock__channel:{{{name}}}"))
            );
        }
        // A primary answers for its own slot and redirects the others.
        let name = "lock-0";
        let mut own = cluster.primary_for(name).connection();
        let _: () = redis::cmd("SET")
            .arg(name)
            .arg("1")
            .query(&mut own)
            .expect("set");
        let other = cluster
            .nodes()
            .iter()
            .find(|n| {
                n.port() != cluster.primary_for(name).port()
                    && cluster.primary_ports().contains(&n.port())
            })
            .expect("another primary");
        let moved: redis::RedisResult<()> = redis::cmd("SET")
            .arg(name)
            .arg("1")
            .query(&mut other.connection());
        assert!(moved.is_err(), "another primary redirects");
    }
}
