//! Tools for trying ferrisson out, behind the facade's `dev` feature as `ferrisson::dev`: what
//! its examples use besides the library, so that each of them compiles pasted into an app that
//! depends on the facade alone.
//!
//! - [`RedisServer`]: the Redis at `REDIS_URL`, or a throwaway `redis-server` on a free
//!   loopback port, killed when dropped.
//! - [`StandInApi`]: a stand-in for a third-party API, shared by every process through Redis,
//!   that notes when each call started and how many were in flight, and [`Report`]s whether
//!   limits held.
//! - [`run_workers`]: this program started again as worker processes.
//! - [`http_get`]: a plain HTTP/1.1 `GET`, for trying a server out.
//!
//! They are for examples, demos and load tests, not for production code.

mod server;
mod stand_in;

pub use server::{INSTALL, RedisServer, find_redis_server};
pub use stand_in::{Report, StandInApi};

use std::process::Stdio;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Any error, as the tools return it.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Starts `n` copies of this program, each with `args` and then its index (`0..n`), their output
/// shown; waits until all have ended, and fails if one did. A copy is killed if this future is
/// dropped first.
///
/// # Errors
///
/// When a copy cannot be started, or one exits with a failure.
pub async fn run_workers(n: usize, args: &[&str]) -> Result<(), BoxError> {
    let exe = std::env::current_exe()?;
    let mut workers = Vec::new();
    for id in 0..n {
        workers.push(
            tokio::process::Command::new(&exe)
                .args(args)
                .arg(id.to_string())
                .stdout(Stdio::inherit())
                .stderr(Stdio::inherit())
                .kill_on_drop(true)
                .spawn()?,
        );
    }
    for mut worker in workers {
        let status = worker.wait().await?;
        if !status.success() {
            return Err(format!("a worker failed: {status}").into());
        }
    }
    Ok(())
}

/// `GET path` on the HTTP/1.1 server at `addr` (`host:port`), the connection closed after the
/// reply: its status code and body.
///
/// # Errors
///
/// When the server cannot be reached or the reply is not HTTP.
pub async fn http_get(addr: &str, path: &str) -> Result<(u16, String), BoxError> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply).await?;
    let status = reply
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("not an HTTP reply: {reply:?}"))?;
    let body = reply
        .split_once("\r\n\r\n")
        .map_or("", |(_, body)| body)
        .to_owned();
    Ok((status, body))
}
