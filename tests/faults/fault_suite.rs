//! The fault suite, in the spirit of Jepsen: worker *processes* (this test binary, started
//! again as `chaos_worker`) use one synchronizer each through a fault-injecting proxy while the
//! coordinator runs every fault the test-support crate has, one after the other: added latency,
//! lost replies, cut connections, a frozen worker (SIGSTOP past its lease), `CLIENT KILL`,
//! `DEBUG SLEEP`, a restart with persistence and one without. Every hold is logged with its
//! token and its loss signal; the checker then asserts, from the logs alone:
//!
//! - no two holders of a lock overlap, unless Redis lost the lock (a restart without
//!   persistence) in between, and then the later holder's fencing token is greater;
//! - tokens strictly increase in acquisition order;
//! - a semaphore never has more holders than its limit (twice the limit right after it lost its
//!   count, the documented window), and is back to the full count at the end;
//! - a latch never opens early, and each participant counts once per round, even when it
//!   counts twice;
//! - every worker makes progress again soon after each fault ends;
//! - no key without an expiry is left behind but the documented ones.
//!
//! It prints a table (fault × synchronizer → holds, violations, recovery time), quoted in
//! docs/guarantees.md.
#![allow(clippy::unwrap_used, clippy::panic, clippy::print_stdout)]

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::*;
use ferrisson::{AcquireOptions, Client, ClientConfig, HoldGuard, Lock, ReentrantLock};
use ferrisson_expirable_semaphore::ExpirableSemaphore;
use ferrisson_fair_lock::FairLock;
use ferrisson_latch::CountDownLatch;
use ferrisson_rwlock::ReadWriteLock;
use ferrisson_semaphore::Semaphore;
use ferrisson_testkit::{FaultProxy, signal_process};

const WORKERS: usize = 4;
/// The workers' lease: short, so that a frozen worker's hold ends soon.
const LEASE: Duration = Duration::from_secs(2);
/// How long each fault lasts (a frozen worker stays frozen for a lease and a half instead).
const FAULT: Duration = Duration::from_millis(1500);
/// The calm after each fault (and before the first).
const CALM: Duration = Duration::from_millis(2500);
/// How long a worker may take to make progress again after a fault ends: one lease.
const RECOVERY_BOUND: Duration = LEASE;
/// A semaphore's limit.
const PERMITS: u32 = 2;
/// Latch rounds set up front (more than a run can use).
const ROUNDS: u32 = 10_000;

// ---------------------------------------------------------------------------------------------
// Workers

/// The worker process: does nothing unless started by a run with its settings in the
/// environment.
#[test]
#[ignore = "a worker process of the fault suite, started by the fault_suite_* tests"]
fn chaos_worker() {
    let Ok(kind) = std::env::var("CHAOS_KIND") else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(worker(&kind));
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"))
}

/// Wall-clock microseconds: all processes run on this machine, so they share the clock.
fn now_us() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_micros(),
    )
    .unwrap()
}

struct Log {
    file: std::fs::File,
    worker: usize,
    rng: u64,
}

impl Log {
    fn event(&mut self, event: std::fmt::Arguments<'_>) {
        // One write of one short line to a file opened for appending: lines never interleave.
        let line = format!("{} {event}\n", self.worker);
        self.file.write_all(line.as_bytes()).unwrap();
    }

    /// A random number below `n` (xorshift).
    fn below(&mut self, n: u64) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng % n
    }
}

/// When `guard`'s lease ends at the earliest, in wall-clock microseconds.
fn deadline_us(guard: &HoldGuard) -> Option<u64> {
    let deadline = guard.lease_deadline()?;
    let (now, wall) = (tokio::time::Instant::now(), now_us());
    let micros = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
    Some(if deadline >= now {
        wall.saturating_add(micros(deadline - now))
    } else {
        wall.saturating_sub(micros(now - deadline))
    })
}

/// Holds `guard` for a few milliseconds of "work", then logs when the holder stopped
/// considering itself the holder: at its release, or (lost) when it was told, or when its
/// lease ran out if that came first (a frozen holder is told only once it runs again, but it
/// did nothing while frozen). Holds last far less than a renewal period, so the deadline
/// taken at the acquisition is the hold's last one.
/// Returns whether the hold is still held, to be released.
async fn work_and_end(log: &mut Log, guard: &HoldGuard, side: &str) -> bool {
    let deadline = deadline_us(guard);
    let token = guard.token().unwrap_or(0);
    if let Some(reason) = guard.loss_reason() {
        // Lost on delivery: the acquire's reply came after the lease could have ended (a
        // worker frozen mid-call; `ExpiredInFlight`, `Stalled`), and the guard says so before
        // its holder does anything under it. Logged as an acquisition and an end, it made a
        // hold of the moment in between, which the semaphores' count of holders at once took
        // for a third holder (seen twice in CI, in two sessions).
        log.event(format_args!(
            "lost_on_delivery {side} {token} {} {reason:?}",
            now_us()
        ));
        return false;
    }
    log.event(format_args!("acq {side} {token} {}", now_us()));
    let work = Duration::from_millis(2 + log.below(13));
    let told = tokio::select! {
        reason = guard.lost() => Some(reason),
        () = tokio::time::sleep(work) => None,
    };
    // The clock is read before the hold is asked about: a worker frozen between a "still
    // held" answer and its log line must not log the end of its hold after the freeze (its
    // belief was last checked before it).
    let now = now_us();
    let lost = told.or_else(|| guard.loss_reason());
    match lost {
        None => {
            log.event(format_args!("end {side} {token} {now} released"));
            true
        }
        Some(reason) => {
            let end = deadline.map_or(now, |d| d.min(now));
            log.event(format_args!("end {side} {token} {end} lost:{reason:?}"));
            false
        }
    }
}

/// Logs a release that failed.
fn released(log: &mut Log, outcome: ferrisson::Result<()>) {
    if let Err(e) = outcome {
        log.event(format_args!("release_error {}", word(&e)));
    }
}

fn word(e: &dyn std::fmt::Display) -> String {
    e.to_string().replace(char::is_whitespace, "_")
}

async fn worker(kind: &str) {
    let worker: usize = env("CHAOS_ID").parse().unwrap();
    let until: u64 = env("CHAOS_UNTIL_US").parse().unwrap();
    let stop = std::path::PathBuf::from(env("CHAOS_STOP"));
    let name = env("CHAOS_NAME");
    let mut log = Log {
        file: std::fs::OpenOptions::new()
            .append(true)
            .open(env("CHAOS_LOG"))
            .unwrap(),
        worker,
        rng: 0x9E37_79B9_7F4A_7C15 ^ ((u64::try_from(worker).unwrap() + 1) << 32) ^ now_us(),
    };
    let config = ClientConfig::new(env("CHAOS_URL")).with_lease(LEASE);
    let client = loop {
        match Client::with_config(config.clone()).await {
            Ok(client) => break client,
            Err(e) => {
                log.event(format_args!("connect_error {}", word(&e)));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    log.event(format_args!("start {}", now_us()));
    let wait = AcquireOptions::new().with_wait(Duration::from_secs(3));
    let mut round = 0;
    let mut unknown_round = None;
    while now_us() < until && !stop.exists() {
        let outcome: ferrisson::Result<()> = match kind {
            "lock" => {
                let lock = ReentrantLock::fenced(&client, &name).unwrap();
                take(&mut log, lock.try_lock_with(wait).await, "w").await
            }
            "fair" => {
                let lock = FairLock::fenced(&client, &name).unwrap();
                take(&mut log, lock.try_lock_with(wait).await, "w").await
            }
            "rwlock" => {
                let rw = ReadWriteLock::fenced(&client, &name).unwrap();
                if log.below(2) == 0 {
                    take(&mut log, rw.read_lock().try_lock_with(wait).await, "r").await
                } else {
                    take(&mut log, rw.write_lock().try_lock_with(wait).await, "w").await
                }
            }
            "expirable" => {
                let semaphore = ExpirableSemaphore::new(&client, &name)
                    .unwrap()
                    .with_limit(PERMITS)
                    .unwrap();
                match semaphore
                    .try_acquire_with(AcquireOptions::new().with_wait(Duration::from_secs(3)))
                    .await
                {
                    Ok(Some(permit)) => {
                        if work_and_end(&mut log, &permit, "p").await {
                            released(&mut log, permit.release().await);
                        }
                        Ok(())
                    }
                    Ok(None) => {
                        log.event(format_args!("timeout {}", now_us()));
                        Ok(())
                    }
                    Err(e) => Err(e),
                }
            }
            "semaphore" => {
                let semaphore = Semaphore::new(&client, &name)
                    .unwrap()
                    .with_limit(PERMITS)
                    .unwrap();
                match semaphore
                    .try_acquire_with(AcquireOptions::new().with_wait(Duration::from_secs(3)))
                    .await
                {
                    Ok(Some(permits)) => {
                        log.event(format_args!("acq p 0 {}", now_us()));
                        let work = Duration::from_millis(2 + log.below(13));
                        tokio::time::sleep(work).await;
                        log.event(format_args!("end p 0 {} released", now_us()));
                        released(&mut log, permits.release().await);
                        Ok(())
                    }
                    Ok(None) => {
                        log.event(format_args!("timeout {}", now_us()));
                        Ok(())
                    }
                    Err(e) => Err(e),
                }
            }
            "latch" => {
                let latch = CountDownLatch::new(&client, &format!("{name}:{round}")).unwrap();
                let participant = format!("w{worker}");
                tokio::time::sleep(Duration::from_millis(log.below(10))).await;
                match latch.count_down_once(&participant).await {
                    Ok(counted) => {
                        if log.below(3) == 0 {
                            // Run twice: counted once.
                            let again = latch.count_down_once(&participant).await;
                            if again.as_ref().is_ok_and(|c| c.counted()) {
                                log.event(format_args!("counted_twice {round}"));
                            }
                        }
                        // After a failed try of this round, "not counted" may mean that the
                        // failed try counted: the checker cannot tell, so it says so.
                        let counted = match (counted.counted(), unknown_round == Some(round)) {
                            (true, _) => "true",
                            (false, true) => "maybe",
                            (false, false) => "false",
                        };
                        log.event(format_args!("count {round} {counted} {}", now_us()));
                        match latch.wait_for(Duration::from_secs(10)).await {
                            Ok(true) => {
                                log.event(format_args!("open {round} {}", now_us()));
                                round += 1;
                                Ok(())
                            }
                            Ok(false) => {
                                log.event(format_args!("stuck {round} {}", now_us()));
                                round += 1;
                                Ok(())
                            }
                            Err(e) => Err(e),
                        }
                    }
                    // Not known whether it counted: ask again (it counts once either way).
                    Err(e) => {
                        unknown_round = Some(round);
                        Err(e)
                    }
                }
            }
            other => panic!("unknown kind {other}"),
        };
        if let Err(e) = outcome {
            log.event(format_args!("error {} {}", now_us(), word(&e)));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    log.event(format_args!("stop {}", now_us()));
}

/// Logs one lock hold (or a timeout) from an acquire's outcome.
async fn take(
    log: &mut Log,
    outcome: ferrisson::Result<Option<HoldGuard>>,
    side: &str,
) -> ferrisson::Result<()> {
    match outcome? {
        Some(guard) => {
            if work_and_end(log, &guard, side).await {
                released(log, guard.unlock().await);
            }
        }
        None => log.event(format_args!("timeout {}", now_us())),
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Faults

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Fault {
    Latency,
    LostReplies,
    CutConnections,
    FrozenWorker,
    ClientKill,
    DebugSleep,
    RestartPersisted,
    RestartDataLoss,
}

const ALL_FAULTS: [Fault; 8] = [
    Fault::Latency,
    Fault::LostReplies,
    Fault::CutConnections,
    Fault::FrozenWorker,
    Fault::ClientKill,
    Fault::DebugSleep,
    Fault::RestartPersisted,
    Fault::RestartDataLoss,
];

impl Fault {
    fn label(self) -> &'static str {
        match self {
            Fault::Latency => "latency 50 ms",
            Fault::LostReplies => "25 % replies lost",
            Fault::CutConnections => "connections cut",
            Fault::FrozenWorker => "holder frozen > lease",
            Fault::ClientKill => "CLIENT KILL",
            Fault::DebugSleep => "DEBUG SLEEP 1",
            Fault::RestartPersisted => "restart, persisted",
            Fault::RestartDataLoss => "restart, data lost",
        }
    }
}

/// When a fault ran, in wall-clock microseconds.
#[derive(Debug, Clone, Copy)]
struct Window {
    fault: Fault,
    start: u64,
    end: u64,
}

/// The worker whose last logged event is an acquisition: it holds right now.
fn holder(log: &std::path::Path) -> Option<usize> {
    let events = std::fs::read_to_string(log).ok()?;
    let mut last: BTreeMap<usize, bool> = BTreeMap::new();
    for line in events.lines() {
        let mut fields = line.split(' ');
        let (Some(worker), Some(event)) = (fields.next(), fields.next()) else {
            continue;
        };
        if let Ok(worker) = worker.parse() {
            last.insert(worker, event == "acq");
        }
    }
    last.into_iter().find(|(_, holds)| *holds).map(|(w, _)| w)
}

/// Freezes (SIGSTOP) a worker caught holding, if one can be caught within a few tries (a
/// latch's workers hold nothing: then worker 0); returns its process id.
fn freeze_a_holder(log: &std::path::Path, workers: &[Child]) -> u32 {
    for _ in 0..200 {
        if let Some(worker) = holder(log) {
            let pid = workers[worker].id();
            signal_process(pid, "-STOP");
            if holder(log) == Some(worker) {
                return pid;
            }
            // It released in between: let it go and try again.
            signal_process(pid, "-CONT");
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let pid = workers[0].id();
    signal_process(pid, "-STOP");
    pid
}

/// Runs `fault` against the run's server, proxy and workers, returning when it is over.
fn inject(
    fault: Fault,
    server: &mut RedisServer,
    proxy: &FaultProxy,
    workers: &[Child],
    log: &std::path::Path,
) {
    match fault {
        Fault::Latency => {
            proxy.delay_replies(Duration::from_millis(50));
            std::thread::sleep(FAULT);
            proxy.delay_replies(Duration::ZERO);
        }
        Fault::LostReplies => {
            proxy.lose_replies(0.25);
            std::thread::sleep(FAULT);
            proxy.lose_replies(0.0);
        }
        Fault::CutConnections => {
            for _ in 0..3 {
                proxy.cut_connections();
                std::thread::sleep(FAULT / 3);
            }
        }
        Fault::FrozenWorker => {
            let pid = freeze_a_holder(log, workers);
            std::thread::sleep(LEASE + LEASE / 2);
            signal_process(pid, "-CONT");
        }
        Fault::ClientKill => {
            let mut con = server.connection();
            for kind in ["normal", "pubsub"] {
                let _: redis::RedisResult<i64> = redis::cmd("CLIENT")
                    .arg("KILL")
                    .arg("TYPE")
                    .arg(kind)
                    .arg("SKIPME")
                    .arg("yes")
                    .query(&mut con);
            }
            std::thread::sleep(FAULT);
        }
        Fault::DebugSleep => {
            let _: () = redis::cmd("DEBUG")
                .arg("SLEEP")
                .arg(1)
                .query(&mut server.connection())
                .unwrap();
            std::thread::sleep(FAULT.saturating_sub(Duration::from_secs(1)));
        }
        Fault::RestartPersisted => {
            server.restart_persisted();
            std::thread::sleep(FAULT);
        }
        Fault::RestartDataLoss => {
            server.restart();
            std::thread::sleep(FAULT);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// One run and its checks

#[derive(Debug, Clone)]
struct Hold {
    /// Shown in violation messages (through `Debug`).
    #[allow(dead_code)]
    worker: usize,
    side: String,
    token: u64,
    acq: u64,
    end: u64,
}

#[derive(Debug, Default)]
struct Row {
    holds: usize,
    /// Holds whose holder was told it lost them.
    lost: usize,
    violations: usize,
    recovery: Duration,
}

#[derive(Debug)]
struct Report {
    kind: &'static str,
    rows: BTreeMap<Fault, Row>,
    /// Every violation found, described.
    violations: Vec<String>,
    /// Overlaps in data-loss windows (documented; fencing held).
    documented: usize,
}

/// A worker stops once the file `stop` exists, or at `until` (a backstop) at the latest.
fn spawn_worker(
    kind: &str,
    id: usize,
    url: &str,
    name: &str,
    log: &str,
    (stop, until): (&str, u64),
) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .arg(test_name(module_path!(), "chaos_worker"))
        .args(["--exact", "--ignored", "--nocapture"])
        .args(["--test-threads", "1"])
        .env("CHAOS_KIND", kind)
        .env("CHAOS_ID", id.to_string())
        .env("CHAOS_URL", url)
        .env("CHAOS_NAME", name)
        .env("CHAOS_LOG", log)
        .env("CHAOS_UNTIL_US", until.to_string())
        .env("CHAOS_STOP", stop)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

async fn run(kind: &'static str, faults: &[Fault]) -> Report {
    let mut server = RedisServer::spawn();
    let proxy = FaultProxy::start(server.port());
    let name = unique_name(&format!("chaos-{kind}"));
    // The server's own temporary directory, removed with it.
    let log_path = server.dir().join("chaos-events.log");
    std::fs::File::create(&log_path).unwrap();
    let direct = client(&server.url()).await;
    if kind == "latch" {
        for round in 0..ROUNDS {
            let latch = CountDownLatch::new(&direct, &format!("{name}:{round}")).unwrap();
            assert!(
                latch
                    .try_set_count(u32::try_from(WORKERS).unwrap())
                    .await
                    .unwrap()
            );
        }
    }
    let phase = FAULT + CALM;
    let total = phase
        .checked_mul(u32::try_from(faults.len()).unwrap())
        .and_then(|faults| faults.checked_add(CALM + LEASE))
        .expect("a run's length fits a Duration");
    // The workers run until the schedule is over, however long its faults took to inject (a
    // frozen worker alone takes longer than FAULT), so that every fault has its calm after it:
    // told by a file; `until` is only a backstop.
    let stop = server.dir().join("chaos-stop");
    let until = now_us() + u64::try_from((total + Duration::from_secs(120)).as_micros()).unwrap();
    let mut workers: Vec<Child> = (0..WORKERS)
        .map(|id| {
            spawn_worker(
                kind,
                id,
                &proxy.url(),
                &name,
                log_path.to_str().unwrap(),
                (stop.to_str().unwrap(), until),
            )
        })
        .collect();
    tokio::time::sleep(CALM).await;
    let mut windows = Vec::new();
    for &fault in faults {
        let start = now_us();
        tokio::task::block_in_place(|| inject(fault, &mut server, &proxy, &workers, &log_path));
        windows.push(Window {
            fault,
            start,
            end: now_us(),
        });
        tokio::time::sleep(CALM).await;
    }
    tokio::time::sleep(LEASE).await;
    std::fs::File::create(&stop).unwrap();
    // The workers stop by themselves now; a stuck one is a failure.
    let deadline = std::time::Instant::now()
        .checked_add(total + Duration::from_secs(30))
        .expect("the workers' deadline fits the clock");
    for worker in &mut workers {
        loop {
            if worker.try_wait().unwrap().is_some() {
                break;
            }
            if std::time::Instant::now() > deadline {
                let _ = worker.kill();
                panic!("{kind}: a worker did not stop");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(worker.wait().unwrap().success(), "{kind}: a worker failed");
    }
    let events = std::fs::read_to_string(&log_path).unwrap();
    // Kept for a look after a failure.
    let kept =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("fault-suite-{kind}.log"));
    let _ = std::fs::write(&kept, &events);
    let mut report = check(kind, &events, &windows);
    check_end_state(kind, &server, &name, &mut report).await;
    report
}

/// The lines of `events` as (worker, fields).
fn parse(events: &str) -> Vec<(usize, Vec<&str>)> {
    events
        .lines()
        .map(|line| {
            let mut fields = line.split(' ');
            let worker = fields.next().unwrap().parse().unwrap();
            (worker, fields.collect())
        })
        .collect()
}

fn holds(events: &[(usize, Vec<&str>)]) -> Vec<Hold> {
    let mut open: BTreeMap<usize, Hold> = BTreeMap::new();
    let mut done = Vec::new();
    for (worker, fields) in events {
        match fields.as_slice() {
            ["acq", side, token, at] => {
                open.insert(
                    *worker,
                    Hold {
                        worker: *worker,
                        side: (*side).to_owned(),
                        token: token.parse().unwrap(),
                        acq: at.parse().unwrap(),
                        end: u64::MAX,
                    },
                );
            }
            ["end", _, _, at, _] => {
                let mut hold = open.remove(worker).unwrap();
                hold.end = at.parse().unwrap();
                done.push(hold);
            }
            _ => {}
        }
    }
    assert!(open.is_empty(), "holds without an end: {open:?}");
    done.sort_by_key(|h| h.acq);
    done
}

/// The fault whose window (from its start to the end of the calm after it) holds `at`.
fn fault_at(windows: &[Window], at: u64) -> Option<Fault> {
    let calm = u64::try_from(CALM.as_micros()).unwrap();
    windows
        .iter()
        .find(|w| w.start <= at && at < w.end + calm)
        .map(|w| w.fault)
}

/// Whether Redis lost data between `from` and `to`.
fn data_lost_between(windows: &[Window], from: u64, to: u64) -> bool {
    windows
        .iter()
        .any(|w| w.fault == Fault::RestartDataLoss && w.start <= to && w.end >= from)
}

fn check(kind: &'static str, events: &str, windows: &[Window]) -> Report {
    let events = parse(events);
    let mut report = Report {
        kind,
        rows: windows.iter().map(|w| (w.fault, Row::default())).collect(),
        violations: Vec::new(),
        documented: 0,
    };
    let violation = |report: &mut Report, at: u64, what: String| {
        if let Some(fault) = fault_at(windows, at) {
            report.rows.get_mut(&fault).unwrap().violations += 1;
        }
        report.violations.push(what);
    };
    // Progress marks: acquisitions, or a latch round opening.
    let progress: Vec<(usize, u64)> = events
        .iter()
        .filter_map(|(worker, fields)| match fields.as_slice() {
            ["acq", _, _, at] | ["open", _, at] => Some((*worker, at.parse().unwrap())),
            _ => None,
        })
        .collect();
    for (_, at) in &progress {
        if let Some(fault) = fault_at(windows, *at) {
            report.rows.get_mut(&fault).unwrap().holds += 1;
        }
    }
    for (_, fields) in &events {
        let told = match fields.as_slice() {
            ["end", _, _, at, how] if how.starts_with("lost") => Some(at),
            ["lost_on_delivery", _, _, at, _] => Some(at),
            _ => None,
        };
        if let Some(at) = told
            && let Some(fault) = fault_at(windows, at.parse().unwrap())
        {
            report.rows.get_mut(&fault).unwrap().lost += 1;
        }
    }
    // Every worker makes progress again after each fault.
    for window in windows {
        for worker in 0..WORKERS {
            let next = progress
                .iter()
                .filter(|(w, at)| *w == worker && *at >= window.end)
                .map(|(_, at)| *at)
                .min();
            let waited = next.map_or(Duration::MAX, |at| Duration::from_micros(at - window.end));
            let row = report.rows.get_mut(&window.fault).unwrap();
            row.recovery = row.recovery.max(waited);
            if waited > RECOVERY_BOUND {
                violation(
                    &mut report,
                    window.end,
                    format!(
                        "worker {worker} made no progress within {RECOVERY_BOUND:?} after {} ended (waited {waited:?})",
                        window.fault.label()
                    ),
                );
            }
        }
    }
    match kind {
        "lock" | "fair" | "rwlock" => {
            let holds = holds(&events);
            for (i, a) in holds.iter().enumerate() {
                for b in &holds[i + 1..] {
                    if b.acq >= a.end {
                        continue;
                    }
                    if a.side == "r" && b.side == "r" {
                        continue;
                    }
                    if data_lost_between(windows, a.acq, b.acq) {
                        report.documented += 1;
                        if a.side == "w" && b.side == "w" && b.token <= a.token {
                            violation(
                                &mut report,
                                b.acq,
                                format!(
                                    "after data loss, {b:?} overlaps {a:?} with no greater token"
                                ),
                            );
                        }
                    } else {
                        violation(&mut report, b.acq, format!("{b:?} overlaps {a:?}"));
                    }
                }
            }
            let writes: Vec<&Hold> = holds.iter().filter(|h| h.side == "w").collect();
            for pair in writes.windows(2) {
                if pair[1].token <= pair[0].token {
                    violation(
                        &mut report,
                        pair[1].acq,
                        format!("tokens went backwards: {:?} then {:?}", pair[0], pair[1]),
                    );
                }
            }
        }
        "semaphore" | "expirable" => {
            let holds = holds(&events);
            let mut edges: Vec<(u64, i64, &Hold)> = Vec::new();
            for hold in &holds {
                edges.push((hold.acq, 1, hold));
                edges.push((hold.end, -1, hold));
            }
            // Ends before starts at the same instant.
            edges.sort_by_key(|(at, delta, _)| (*at, *delta));
            let mut live = 0i64;
            for (at, delta, hold) in edges {
                live += delta;
                let since = u64::try_from(LEASE.as_micros()).unwrap();
                let limit = if data_lost_between(windows, at.saturating_sub(since), at) {
                    2 * i64::from(PERMITS)
                } else {
                    i64::from(PERMITS)
                };
                if live > i64::from(PERMITS) && live <= limit {
                    report.documented += 1;
                }
                if live > limit {
                    violation(
                        &mut report,
                        at,
                        format!("{live} holders at once (limit {PERMITS}), at {hold:?}"),
                    );
                }
            }
        }
        "latch" => {
            let mut counted: BTreeMap<u32, BTreeSet<usize>> = BTreeMap::new();
            let mut opened: BTreeMap<u32, u64> = BTreeMap::new();
            let mut stuck: Vec<(usize, u32, u64)> = Vec::new();
            for (worker, fields) in &events {
                match fields.as_slice() {
                    ["count", round, "true" | "maybe", _] => {
                        let round: u32 = round.parse().unwrap();
                        if !counted.entry(round).or_default().insert(*worker) {
                            violation(
                                &mut report,
                                0,
                                format!("worker {worker} counted twice in round {round}"),
                            );
                        }
                    }
                    ["counted_twice", round] => violation(
                        &mut report,
                        0,
                        format!("worker {worker} ran twice and counted twice in round {round}"),
                    ),
                    ["open", round, at] => {
                        opened.insert(round.parse().unwrap(), at.parse().unwrap());
                    }
                    ["stuck", round, at] => {
                        stuck.push((*worker, round.parse().unwrap(), at.parse().unwrap()));
                    }
                    _ => {}
                }
            }
            for (worker, round, at) in stuck {
                // A round every participant counted must open. (At the end of the run, the
                // first workers to stop leave the others' last round short of a count: a wait
                // there is no fault of the latch.)
                if counted.get(&round).map_or(0, BTreeSet::len) == WORKERS {
                    violation(
                        &mut report,
                        at,
                        format!("worker {worker} waited 10 s for round {round}"),
                    );
                }
            }
            for (round, at) in &opened {
                let counts = counted.get(round).map_or(0, BTreeSet::len);
                // A latch that opened early was deleted before every participant counted:
                // the late ones found nothing to count down.
                if counts != WORKERS {
                    violation(
                        &mut report,
                        *at,
                        format!(
                            "round {round} opened with {counts} of {WORKERS} participants counted"
                        ),
                    );
                }
            }
        }
        other => panic!("no checks for {other}"),
    }
    report
}

/// After the run: a lease later, the synchronizer is free (or full), and every key left
/// without an expiry is a documented one.
async fn check_end_state(kind: &str, server: &RedisServer, name: &str, report: &mut Report) {
    tokio::time::sleep(LEASE + Duration::from_millis(500)).await;
    let client = client(&server.url()).await;
    let free = match kind {
        "lock" => !ReentrantLock::new(&client, name)
            .unwrap()
            .is_locked()
            .await
            .unwrap(),
        "fair" => !FairLock::new(&client, name)
            .unwrap()
            .is_locked()
            .await
            .unwrap(),
        "rwlock" => !ReadWriteLock::new(&client, name)
            .unwrap()
            .is_locked()
            .await
            .unwrap(),
        "semaphore" => {
            Semaphore::new(&client, name)
                .unwrap()
                .available_permits()
                .await
                .unwrap()
                == i64::from(PERMITS)
        }
        "expirable" => {
            ExpirableSemaphore::new(&client, name)
                .unwrap()
                .available_permits()
                .await
                .unwrap()
                == i64::from(PERMITS)
        }
        _ => true,
    };
    if !free {
        report.violations.push(format!(
            "{kind}: not free (or not full) a lease after the run"
        ));
    }
    let mut con = server.connection();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut con).unwrap();
    let documented = |key: &str| -> bool {
        key == format!("redisson_lock_token:{{{name}}}")
            || (matches!(kind, "semaphore" | "expirable") && key == name)
            || (kind == "semaphore" && key == format!("{{{name}}}:epoch"))
            || (kind == "latch" && key.contains(&format!("{name}:")))
    };
    for key in keys {
        let ttl: i64 = redis::cmd("PTTL").arg(&key).query(&mut con).unwrap();
        if ttl < 0 && !documented(&key) {
            report
                .violations
                .push(format!("{kind}: key `{key}` left behind without an expiry"));
        }
    }
}

fn print_table(reports: &[Report]) {
    let mut out = String::from(
        "| synchronizer | fault | holds | told lost | violations | recovery |\n|---|---|---:|---:|---:|---:|\n",
    );
    for report in reports {
        for (fault, row) in &report.rows {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} ms |\n",
                report.kind,
                fault.label(),
                row.holds,
                row.lost,
                row.violations,
                row.recovery.as_millis()
            ));
        }
    }
    for report in reports {
        out.push_str(&format!(
            "\n{}: {} overlaps or excess holders inside data-loss windows (documented; tokens checked)",
            report.kind, report.documented
        ));
    }
    println!("{out}");
    // Appended: each test of the suite (one per synchronizer) writes its table there.
    if let Ok(path) = std::env::var("FAULT_SUITE_REPORT") {
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut file| file.write_all(format!("{out}\n\n").as_bytes()));
        if let Err(e) = appended {
            println!("could not write the report: {e}");
        }
    }
}

fn assert_clean(reports: &[Report]) {
    print_table(reports);
    for report in reports {
        assert!(
            report.violations.is_empty(),
            "{}: {} violations:\n{}",
            report.kind,
            report.violations.len(),
            report.violations.join("\n")
        );
    }
}

/// Every fault against `kind`'s workers, then the checks. A latch lost with the data opens
/// early (docs/guarantees.md): it runs every fault but that one. One test per synchronizer, so
/// that the runner can run them side by side (each run is a fixed schedule of faults and calms,
/// about 40 s, mostly waiting).
async fn fault_suite_for(kind: &'static str) {
    let faults: Vec<Fault> = ALL_FAULTS
        .into_iter()
        .filter(|f| kind != "latch" || *f != Fault::RestartDataLoss)
        .collect();
    let report = run(kind, &faults).await;
    assert_clean(&[report]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_suite_lock() {
    fault_suite_for("lock").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_suite_fair_lock() {
    fault_suite_for("fair").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_suite_rwlock() {
    fault_suite_for("rwlock").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_suite_semaphore() {
    fault_suite_for("semaphore").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_suite_expirable_semaphore() {
    fault_suite_for("expirable").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_suite_latch() {
    fault_suite_for("latch").await;
}
