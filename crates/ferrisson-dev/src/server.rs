//! A throwaway `redis-server`.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How to get a `redis-server` when none is found.
pub const INSTALL: &str = "no redis-server found: install one (`apt-get install -y \
redis-server` on Debian/Ubuntu, `brew install redis` on macOS), or point REDIS_SERVER_BIN at \
a redis-server binary, or set REDIS_URL=redis://host:port to use a running server";

/// How long a started server has to answer `PING`.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// The `redis-server` binary: `REDIS_SERVER_BIN` when set (and a file), else the first on the
/// `PATH`, else the usual install places.
pub fn find_redis_server() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("REDIS_SERVER_BIN") {
        let path = PathBuf::from(path);
        return path.is_file().then_some(path);
    }
    let from_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("redis-server"))
            .find(|p| p.is_file())
    });
    from_path.or_else(|| {
        [
            "/usr/bin/redis-server",
            "/usr/local/bin/redis-server",
            "/opt/homebrew/bin/redis-server",
        ]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
    })
}

/// A `redis-server` of this process's own, on a free loopback port, without persistence, its
/// files in a temp dir; killed (and its dir removed) when dropped.
///
/// ```no_run
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use ferrisson_dev::RedisServer;
///
/// // The server at REDIS_URL, or a throwaway one (kept until `server` drops).
/// let (server, url) = RedisServer::from_env_or_spawn()?;
/// if server.is_some() {
///     println!("started a throwaway redis-server at {url}");
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct RedisServer {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl RedisServer {
    /// The server at `REDIS_URL` when that is set and not empty (`None` and its URL), else a
    /// throwaway one started now (it and its URL).
    ///
    /// # Errors
    ///
    /// As [`spawn`](Self::spawn).
    pub fn from_env_or_spawn() -> std::io::Result<(Option<Self>, String)> {
        match std::env::var("REDIS_URL") {
            Ok(url) if !url.is_empty() => Ok((None, url)),
            _ => {
                let server = Self::spawn()?;
                let url = server.url();
                Ok((Some(server), url))
            }
        }
    }

    /// Starts a server on a free loopback port and waits until it answers `PING`.
    ///
    /// # Errors
    ///
    /// [`std::io::ErrorKind::NotFound`] with [`INSTALL`]'s instructions when there is no
    /// `redis-server`; another error, with the server's log, when it did not start.
    pub fn spawn() -> std::io::Result<Self> {
        let binary = find_redis_server()
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, INSTALL))?;
        let mut last = std::io::Error::other("redis-server did not start");
        // Another process can take the free port between our probe and the server's bind.
        for _ in 0..5 {
            match Self::try_start(&binary) {
                Ok(server) => return Ok(server),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    fn try_start(binary: &std::path::Path) -> std::io::Result<Self> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let dir =
            std::env::temp_dir().join(format!("ferrisson-dev-redis-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let log = dir.join("redis.log");
        let child = Command::new(binary)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
            .arg("--dir")
            .arg(&dir)
            .arg("--logfile")
            .arg(&log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let mut server = Self { child, port, dir };
        let deadline = Instant::now()
            .checked_add(START_TIMEOUT)
            .ok_or_else(|| std::io::Error::other("the clock cannot count the start timeout"))?;
        loop {
            if server.answers_ping() {
                return Ok(server);
            }
            let ended = server.child.try_wait()?;
            if ended.is_some() || Instant::now() > deadline {
                let log = std::fs::read_to_string(&log).unwrap_or_default();
                return Err(std::io::Error::other(format!(
                    "redis-server on port {port} did not start ({}): {log}",
                    ended.map_or_else(|| "no answer".to_owned(), |s| s.to_string())
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn answers_ping(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
        let mut reply = [0u8; 7];
        stream.write_all(b"PING\r\n").is_ok()
            && stream.read_exact(&mut reply).is_ok()
            && &reply == b"+PONG\r\n"
    }

    /// Its URL: `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Its port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
