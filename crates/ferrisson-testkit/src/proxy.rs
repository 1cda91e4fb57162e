//! A TCP proxy in front of a server that injects faults on the way back: it loses replies
//! (the command ran, the client never hears of it), delays them, and cuts connections.
//!
//! A reply is "lost" the only way a stream protocol can lose one: the proxy reads the server's
//! bytes and, instead of passing them on, closes both sides of the connection. The command ran
//! on the server; the client sees a broken connection and must find out what happened.
//!
//! A request can also be *held*: the proxy keeps it back and cuts the client's side of its
//! connection, as a link that fails right after the request left would; the request reaches
//! the server later, when the test says so ([`FaultProxy::deliver_held`]), after whatever the
//! client sent on a new connection meanwhile.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Shares are kept in parts per million.
const MILLION: u32 = 1_000_000;

#[derive(Debug, Default)]
struct Faults {
    /// Parts per million of server reads that are lost (the connection is cut instead).
    loss_ppm: AtomicU32,
    /// Delay before each server read is passed on, in microseconds.
    delay_us: AtomicU64,
    /// State of the proxy's random numbers (xorshift).
    rng: AtomicU64,
    /// Replies lost so far.
    lost: AtomicU64,
    /// Connections accepted so far.
    accepted: AtomicU64,
    /// What the next request read to hold back contains ([`FaultProxy::hold_next_request`]).
    hold_next: Mutex<Option<Vec<u8>>>,
    /// Requests held so far.
    held: AtomicU64,
    /// How many times the held requests were let go: a request held while this was `g`
    /// reaches the server once it is above `g`.
    delivered: AtomicU64,
    /// Replies the server sent to held requests after their late delivery.
    late_replies: AtomicU64,
    stopping: AtomicBool,
    /// Both ends of every live connection, by connection number, to cut them.
    open: Mutex<std::collections::HashMap<u64, Vec<TcpStream>>>,
}

impl Faults {
    fn roll(&self) -> u32 {
        let mut x = self.rng.load(Ordering::Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng.store(x, Ordering::Relaxed);
        (x % u64::from(MILLION)) as u32
    }

    /// Whether this request read is to be held back.
    fn take_hold(&self, read: &[u8]) -> bool {
        let mut next = self.hold_next.lock().unwrap_or_else(|p| p.into_inner());
        let wanted = next.as_ref().is_some_and(|marker| {
            read.windows(marker.len().max(1))
                .any(|w| w == marker.as_slice())
        });
        if wanted {
            *next = None;
        }
        wanted
    }

    fn cut_all(&self) {
        let open = std::mem::take(&mut *self.open.lock().unwrap_or_else(|p| p.into_inner()));
        for stream in open.into_values().flatten() {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

/// A fault-injecting proxy on a free loopback port, forwarding to `127.0.0.1:<upstream>`.
/// Stops (and cuts every connection) on drop.
#[derive(Debug)]
pub struct FaultProxy {
    port: u16,
    faults: Arc<Faults>,
}

impl FaultProxy {
    /// Starts a proxy to the server listening on `127.0.0.1:upstream_port`, passing everything
    /// through until told otherwise.
    ///
    /// # Panics
    ///
    /// When no loopback port can be bound (a test set-up failure).
    #[allow(clippy::panic)]
    pub fn start(upstream_port: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .unwrap_or_else(|e| panic!("fault proxy: cannot bind a loopback port: {e}"));
        let port = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("fault proxy: no local address: {e}"))
            .port();
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0x9e37_79b9, |d| d.as_nanos() as u64)
            | 1;
        let faults = Arc::new(Faults {
            rng: AtomicU64::new(seed),
            ..Faults::default()
        });
        let accepting = faults.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if accepting.stopping.load(Ordering::Acquire) {
                    break;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream_port)) else {
                    // The server is down: the client sees its connection closed.
                    continue;
                };
                let number = accepting.accepted.fetch_add(1, Ordering::Relaxed);
                pipe(number, client, server, accepting.clone());
            }
        });
        Self { port, faults }
    }

    /// The proxy's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:<proxy port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Loses this share (0.0 to 1.0) of the server's replies: the connection that carried
    /// each is cut instead of passing it on.
    pub fn lose_replies(&self, share: f64) {
        let ppm = (share.clamp(0.0, 1.0) * f64::from(MILLION)) as u32;
        self.faults.loss_ppm.store(ppm, Ordering::Relaxed);
    }

    /// Holds every reply back this long before passing it on (zero: none).
    pub fn delay_replies(&self, delay: Duration) {
        let us = u64::try_from(delay.as_micros()).unwrap_or(u64::MAX);
        self.faults.delay_us.store(us, Ordering::Relaxed);
    }

    /// Cuts every open connection now (new ones are accepted as before).
    pub fn cut_connections(&self) {
        self.faults.cut_all();
    }

    /// How many replies were lost so far.
    pub fn replies_lost(&self) -> u64 {
        self.faults.lost.load(Ordering::Relaxed)
    }

    /// Holds back the next request read (on whatever connection) that contains `marker` (a key
    /// name, say): it is kept from the server and the client's side of its connection is cut,
    /// so the client sees the link fail with its request gone and nothing heard; the request
    /// reaches the server at the next [`deliver_held`](Self::deliver_held), on its own
    /// connection, late. A read holds all the requests it carries (a pipeline's).
    pub fn hold_next_request(&self, marker: &str) {
        *self
            .faults
            .hold_next
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(marker.as_bytes().to_vec());
    }

    /// Holds back no request any more (the one [`hold_next_request`](Self::hold_next_request)
    /// asked for, if none came).
    pub fn hold_no_request(&self) {
        *self
            .faults
            .hold_next
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// How many requests were held back so far.
    pub fn requests_held(&self) -> u64 {
        self.faults.held.load(Ordering::Acquire)
    }

    /// Lets the requests held so far reach the server.
    pub fn deliver_held(&self) {
        self.faults.delivered.fetch_add(1, Ordering::AcqRel);
    }

    /// How many replies the server sent to held requests after their delivery: once it has
    /// replied, a held request has run.
    pub fn late_replies(&self) -> u64 {
        self.faults.late_replies.load(Ordering::Acquire)
    }

    /// How many connections the proxy accepted so far.
    pub fn connections_accepted(&self) -> u64 {
        self.faults.accepted.load(Ordering::Relaxed)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.faults.stopping.store(true, Ordering::Release);
        self.faults.cut_all();
        // Wake the accept loop so that it sees `stopping`.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Relays one connection: requests as they come, replies through the faults.
fn pipe(number: u64, client: TcpStream, server: TcpStream, faults: Arc<Faults>) {
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (Ok(client_in), Ok(server_in)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let ends = [&client, &server]
        .iter()
        .filter_map(|s| s.try_clone().ok())
        .collect();
    faults
        .open
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(number, ends);
    // Requests: passed through, unless one is held back.
    let late = Arc::new(AtomicBool::new(false));
    let (mut from, mut to) = (client_in, server);
    let (requests, marked) = (faults.clone(), late.clone());
    std::thread::spawn(move || {
        let faults = requests;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if faults.take_hold(&buf[..n]) {
                // The client's side fails now; the request reaches the server later, and
                // the server's side stays open for its reply (the reply thread ends it).
                let _ = from.shutdown(Shutdown::Both);
                let round = faults.delivered.load(Ordering::Acquire);
                faults.held.fetch_add(1, Ordering::AcqRel);
                while faults.delivered.load(Ordering::Acquire) == round
                    && !faults.stopping.load(Ordering::Acquire)
                {
                    std::thread::sleep(Duration::from_millis(1));
                }
                marked.store(true, Ordering::Release);
                let _ = to.write_all(&buf[..n]);
                return;
            }
            if to.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Both);
        let _ = from.shutdown(Shutdown::Both);
    });
    // Replies: delayed, lost or passed on.
    let (mut from, mut to) = (server_in, client);
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if late.load(Ordering::Acquire) {
                faults.late_replies.fetch_add(1, Ordering::AcqRel);
            }
            let delay = faults.delay_us.load(Ordering::Relaxed);
            if delay > 0 {
                std::thread::sleep(Duration::from_micros(delay));
            }
            if faults.roll() < faults.loss_ppm.load(Ordering::Relaxed) {
                faults.lost.fetch_add(1, Ordering::Relaxed);
                break;
            }
            if to.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Both);
        let _ = from.shutdown(Shutdown::Both);
        faults
            .open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&number);
    });
}
