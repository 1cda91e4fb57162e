//! The Docker backend: `redis-server` in containers, driven by testcontainers' async runner
//! on a thread of its own, so that the testkit's synchronous calls work the same from plain
//! tests and from inside a test's Tokio runtime.
//!
//! Containers use the host's network and bind-mount the server's temporary folder at the same
//! path, so that a containerised server listens on the loopback port the testkit picked, keeps
//! its log and snapshot where the process backend does, and restarts on the same port.

use std::collections::HashMap;
use std::path::Path;
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};

use testcontainers::core::{Mount, WaitFor};
use testcontainers::runners::AsyncRunner;
use testcontainers::{ContainerAsync, GenericImage, ImageExt};

/// The image when `FERRISSON_TEST_REDIS_IMAGE` is unset: the official Redis 7 image.
pub const DEFAULT_IMAGE: &str = "redis:7";

/// The image the tests run, `name[:tag]`.
pub fn image() -> String {
    match std::env::var("FERRISSON_TEST_REDIS_IMAGE") {
        Ok(image) if !image.is_empty() => image,
        _ => DEFAULT_IMAGE.to_owned(),
    }
}

/// The major version the image's tag names (`redis:6.2` → 6), 7 when the tag does not say.
pub fn image_major_version() -> u32 {
    image()
        .rsplit_once(':')
        .and_then(|(_, tag)| tag.split('.').next()?.parse().ok())
        .unwrap_or(7)
}

type Reply<T> = mpsc::Sender<Result<T, String>>;

enum Request {
    Run {
        args: Vec<String>,
        dir: String,
        reply: Reply<u64>,
    },
    Pause(u64, Reply<()>),
    Unpause(u64, Reply<()>),
    Remove(u64, Reply<()>),
}

struct Driver {
    tx: Mutex<mpsc::Sender<Request>>,
}

fn driver() -> &'static Driver {
    static DRIVER: OnceLock<Driver> = OnceLock::new();
    DRIVER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Request>();
        std::thread::Builder::new()
            .name("ferrisson-testkit-docker".into())
            .spawn(move || serve(rx))
            .ok();
        Driver { tx: Mutex::new(tx) }
    })
}

fn serve(rx: mpsc::Receiver<Request>) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            let message = format!("the testkit's Docker driver could not start a runtime: {e}");
            while let Ok(request) = rx.recv() {
                match request {
                    Request::Run { reply, .. } => {
                        let _ = reply.send(Err(message.clone()));
                    }
                    Request::Pause(_, reply)
                    | Request::Unpause(_, reply)
                    | Request::Remove(_, reply) => {
                        let _ = reply.send(Err(message.clone()));
                    }
                }
            }
            return;
        }
    };
    let mut containers: HashMap<u64, ContainerAsync<GenericImage>> = HashMap::new();
    let mut next = 0u64;
    while let Ok(request) = rx.recv() {
        match request {
            Request::Run { args, dir, reply } => {
                let result = runtime.block_on(run(args, dir)).map(|container| {
                    next += 1;
                    containers.insert(next, container);
                    next
                });
                let _ = reply.send(result);
            }
            Request::Pause(id, reply) => {
                let result = match containers.get(&id) {
                    Some(c) => runtime.block_on(c.pause()).map_err(|e| e.to_string()),
                    None => Err(format!("no container {id}")),
                };
                let _ = reply.send(result);
            }
            Request::Unpause(id, reply) => {
                let result = match containers.get(&id) {
                    Some(c) => runtime.block_on(c.unpause()).map_err(|e| e.to_string()),
                    None => Err(format!("no container {id}")),
                };
                let _ = reply.send(result);
            }
            Request::Remove(id, reply) => {
                let result = match containers.remove(&id) {
                    Some(c) => runtime.block_on(c.rm()).map_err(|e| e.to_string()),
                    None => Ok(()),
                };
                let _ = reply.send(result);
            }
        }
    }
}

async fn run(args: Vec<String>, dir: String) -> Result<ContainerAsync<GenericImage>, String> {
    let image = image();
    let (name, tag) = image.rsplit_once(':').unwrap_or((image.as_str(), "latest"));
    GenericImage::new(name, tag)
        .with_wait_for(WaitFor::Nothing)
        .with_network("host")
        .with_mount(Mount::bind_mount(dir.clone(), dir))
        .with_cmd(args)
        .start()
        .await
        .map_err(|e| {
            format!(
                "cannot start a `{image}` container (is a Docker engine running? the docker CLI being installed is not enough; FERRISSON_TEST_REDIS_IMAGE names the image): {e}"
            )
        })
}

fn ask<T>(request: impl FnOnce(Reply<T>) -> Request) -> Result<T, String> {
    let (reply, answer) = mpsc::channel();
    let sent = driver()
        .tx
        .lock()
        .map_err(|e| e.to_string())?
        .send(request(reply));
    if sent.is_err() {
        return Err("the testkit's Docker driver stopped".into());
    }
    answer
        .recv()
        .map_err(|_| "the testkit's Docker driver stopped".to_owned())?
}

/// A running container of the configured image, started with `args` (the arguments of
/// `redis-server`; the official image's entrypoint runs `redis-server` for arguments that start
/// with `-` or name a `.conf` file), with `dir` mounted at the same path.
#[derive(Debug)]
pub struct Container {
    id: u64,
}

impl Container {
    /// Starts one.
    ///
    /// # Errors
    ///
    /// Why the container could not be started.
    pub fn run(args: Vec<String>, dir: &Path) -> Result<Self, String> {
        let dir = dir.to_string_lossy().into_owned();
        ask(|reply| Request::Run { args, dir, reply }).map(|id| Self { id })
    }

    /// `docker pause`: every process in it frozen, connections open.
    ///
    /// # Errors
    ///
    /// What Docker answered.
    pub fn pause(&self) -> Result<(), String> {
        ask(|reply| Request::Pause(self.id, reply))
    }

    /// `docker unpause`.
    ///
    /// # Errors
    ///
    /// What Docker answered.
    pub fn unpause(&self) -> Result<(), String> {
        ask(|reply| Request::Unpause(self.id, reply))
    }

    /// A handle that can unpause this container from another thread.
    pub fn thaw_handle(&self) -> Thaw {
        Thaw { id: self.id }
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        // Killed and removed at once (`docker rm -f`), like a crashed process.
        let _ = ask(|reply| Request::Remove(self.id, reply));
    }
}

/// Unpauses a container from any thread ([`Container::thaw_handle`]).
#[derive(Debug, Clone, Copy)]
pub struct Thaw {
    id: u64,
}

impl Thaw {
    /// `docker unpause`.
    ///
    /// # Errors
    ///
    /// What Docker answered.
    pub fn thaw(self) -> Result<(), String> {
        ask(|reply| Request::Unpause(self.id, reply))
    }
}
