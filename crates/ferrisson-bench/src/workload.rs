//! Running one lock workload over many tasks for a fixed time.

use ferrisson::Lock;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use crate::stats::Latencies;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One task's way of taking and releasing a lock once.
pub trait Cycle: Send + Sync + 'static {
    /// Acquire (waiting as long as it takes), hold for `hold`, release. Returns the time spent
    /// acquiring.
    fn cycle(&self, hold: Duration) -> BoxFuture<'_, Result<Duration, String>>;
}

/// A ferrisson synchronizer taken and given back as a whole: a lock of any kind, a side of a
/// read-write lock, one permit of a semaphore.
///
/// Statically dispatched: a [`HoldCycle`] is one boxed future per cycle, as a raw cycle is,
/// so the harness costs both sides the same.
pub trait Acquire: Send + Sync + 'static {
    type Guard: Send + 'static;
    fn acquire(&self) -> impl Future<Output = ferrisson::Result<Self::Guard>> + Send;
    fn release(guard: Self::Guard) -> impl Future<Output = ferrisson::Result<()>> + Send;
}

macro_rules! acquire_hold {
    ($($lock:ty),*) => {$(
        impl Acquire for $lock {
            type Guard = ferrisson::core::HoldGuard;
            fn acquire(&self) -> impl Future<Output = ferrisson::Result<Self::Guard>> + Send {
                self.lock()
            }
            fn release(guard: Self::Guard) -> impl Future<Output = ferrisson::Result<()>> + Send {
                guard.unlock()
            }
        }
    )*};
}

acquire_hold!(
    ferrisson::ReentrantLock,
    ferrisson::FairLock,
    ferrisson::ReadLock,
    ferrisson::SpinLock,
    ferrisson::WriteLock,
    ferrisson::Mutex
);

impl Acquire for ferrisson::Semaphore {
    type Guard = ferrisson::Permits;
    fn acquire(&self) -> impl Future<Output = ferrisson::Result<Self::Guard>> + Send {
        ferrisson::Semaphore::acquire(self)
    }
    fn release(guard: Self::Guard) -> impl Future<Output = ferrisson::Result<()>> + Send {
        guard.release()
    }
}

impl Acquire for ferrisson::ExpirableSemaphore {
    type Guard = ferrisson::Permit;
    fn acquire(&self) -> impl Future<Output = ferrisson::Result<Self::Guard>> + Send {
        // The inherent `acquire`: one permit kept by the watchdog.
        ferrisson::ExpirableSemaphore::acquire(self)
    }
    fn release(guard: Self::Guard) -> impl Future<Output = ferrisson::Result<()>> + Send {
        guard.release()
    }
}

/// Take, hold, give back, with a ferrisson synchronizer of any kind.
pub struct HoldCycle<L>(pub L);

impl<L: Acquire> Cycle for HoldCycle<L> {
    fn cycle(&self, hold: Duration) -> BoxFuture<'_, Result<Duration, String>> {
        Box::pin(async move {
            let t0 = Instant::now();
            let guard = self.0.acquire().await.map_err(|e| e.to_string())?;
            let waited = t0.elapsed();
            hold_for(hold).await?;
            L::release(guard).await.map_err(|e| e.to_string())?;
            Ok(waited)
        })
    }
}

/// Holds the lock for `hold`: a blocking sleep on the blocking pool, which keeps to the
/// time far better than the runtime's 1 ms timer wheel (a 1 ms `tokio::time::sleep` lasts up
/// to 2 ms), so that every library holds for the same time as the node and python peers do.
pub async fn hold_for(hold: Duration) -> Result<(), String> {
    if hold.is_zero() {
        return Ok(());
    }
    tokio::task::spawn_blocking(move || std::thread::sleep(hold))
        .await
        .map_err(|e| e.to_string())
}

/// What a run measured.
#[derive(Debug, Default)]
pub struct RunResult {
    pub cycles_per_task: Vec<u64>,
    /// Time spent acquiring, per cycle.
    pub waits: Latencies,
    /// Whole cycle (acquire + hold + release), per cycle.
    pub cycles: Latencies,
    pub elapsed: Duration,
    /// CPU time of this process (every thread) during the run; the Redis server is another
    /// process, so this is the client's cost alone.
    pub cpu: Duration,
    /// Heap allocations of this process (every thread) during the run.
    pub allocs: u64,
}

impl RunResult {
    pub fn total(&self) -> u64 {
        self.cycles_per_task.iter().sum()
    }

    pub fn per_sec(&self) -> f64 {
        self.total() as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Client CPU time per cycle, in microseconds.
    pub fn cpu_us_per_cycle(&self) -> f64 {
        self.cpu.as_secs_f64() * 1e6 / (self.total().max(1) as f64)
    }

    /// Heap allocations per cycle, the harness's own included (a sample push now and then).
    pub fn allocs_per_cycle(&self) -> f64 {
        self.allocs as f64 / (self.total().max(1) as f64)
    }

    /// Adds another round of the same workload: counts per task, samples and time add up.
    pub fn merge(&mut self, other: RunResult) {
        if self.cycles_per_task.len() < other.cycles_per_task.len() {
            self.cycles_per_task.resize(other.cycles_per_task.len(), 0);
        }
        for (mine, theirs) in self.cycles_per_task.iter_mut().zip(other.cycles_per_task) {
            *mine += theirs;
        }
        self.waits.extend(other.waits);
        self.cycles.extend(other.cycles);
        self.elapsed += other.elapsed;
        self.cpu += other.cpu;
        self.allocs += other.allocs;
    }
}

/// Runs every cycle in its own task, each looping until `duration` has passed.
pub async fn run(
    cycles: Vec<Box<dyn Cycle>>,
    duration: Duration,
    hold: Duration,
) -> Result<RunResult, String> {
    run_counted(cycles, duration, hold, Arc::default()).await
}

/// One round of a head-to-head comparison: `ours` and `theirs` run one after the other, `ours`
/// first when `ours_first` (callers alternate it between rounds, so that a drift of the machine
/// within a round favours neither side). Returns (ours, theirs).
pub async fn in_turn<A, B>(
    ours_first: bool,
    ours: impl Future<Output = Result<A, String>>,
    theirs: impl Future<Output = Result<B, String>>,
) -> Result<(A, B), String> {
    if ours_first {
        let ours = ours.await?;
        Ok((ours, theirs.await?))
    } else {
        let theirs = theirs.await?;
        Ok((ours.await?, theirs))
    }
}

/// Runs `runs` one after another, starting with the one at `first` (modulo their number) and
/// going round: with `first` the round's number, each library goes first in its turn. The
/// results come back in the order of `runs`.
pub async fn in_rotation<T>(
    first: usize,
    runs: Vec<BoxFuture<'_, Result<T, String>>>,
) -> Result<Vec<T>, String> {
    let n = runs.len();
    let mut runs: Vec<Option<_>> = runs.into_iter().map(Some).collect();
    let mut results: Vec<Option<T>> = (0..n).map(|_| None).collect();
    for i in 0..n {
        let at = (first + i) % n;
        if let Some(run) = runs[at].take() {
            results[at] = Some(run.await?);
        }
    }
    Ok(results.into_iter().flatten().collect())
}

/// As [`run`], adding each finished cycle to `done` as it finishes, so that a sampler can
/// count the cycles of a window inside the run.
pub async fn run_counted(
    cycles: Vec<Box<dyn Cycle>>,
    duration: Duration,
    hold: Duration,
    done: Arc<AtomicU64>,
) -> Result<RunResult, String> {
    let started = Instant::now();
    let cpu_started = cpu_time::ProcessTime::try_now().ok();
    let allocs_started = crate::allocations();
    let deadline = started + duration;
    let mut tasks = Vec::with_capacity(cycles.len());
    for c in cycles {
        let done = done.clone();
        tasks.push(tokio::spawn(async move {
            let mut waits = Latencies::default();
            let mut whole = Latencies::default();
            let mut n = 0u64;
            while Instant::now() < deadline {
                let t0 = Instant::now();
                let wait = c.cycle(hold).await?;
                whole.record(t0.elapsed());
                waits.record(wait);
                n += 1;
                done.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<_, String>((n, waits, whole))
        }));
    }
    let mut result = RunResult::default();
    for task in tasks {
        let (n, waits, whole) = task.await.map_err(|e| e.to_string())??;
        result.cycles_per_task.push(n);
        result.waits.extend(waits);
        result.cycles.extend(whole);
    }
    result.elapsed = started.elapsed();
    result.cpu = cpu_started
        .and_then(|t| t.try_elapsed().ok())
        .unwrap_or_default();
    result.allocs = crate::allocations().saturating_sub(allocs_started);
    Ok(result)
}
