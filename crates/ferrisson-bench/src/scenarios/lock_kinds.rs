//! `contended` for the fair lock, the spin lock, the lean mutex and the read-write lock.
//!
//! - Spin lock and mutex: the contended workload (4 clients × 16 tasks, hold 0 and 1 ms); the
//!   spin lock's waiters poll with backoff instead of sleeping on a channel.
//! - Fair lock: the contended workload (4 clients × 16 tasks, hold 0 and 1 ms), and the FIFO
//!   check: 32 waiters of 4 clients queued in a known order, released, counted out of order.
//! - Read-write lock: read lock + unlock throughput with 64 readers of 4 clients, and the wait
//!   of one writer among them (read-heavy load); then the same with 16 more readers that play
//!   Redisson's (its read-lock scripts, which ignore ferrisson's writer intent), the writer
//!   waiting at most 2 s each time.

use ferrisson::Lock;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferrisson::{Client, FairLock, Mutex as LeanMutex, ReadWriteLock, SpinLock};
use tokio::time::Instant;

use super::contended::{measure, record};
use super::{CONTENDED_CLIENTS, CONTENDED_TASKS, Ctx, HOLDS};
use crate::record::Records;
use crate::stats::Latencies;
use crate::workload::{self, Cycle, HoldCycle};

pub const FAIR: &str = "ferrisson-fair-lock";
pub const RWLOCK: &str = "ferrisson-rwlock";
pub const SPIN: &str = "ferrisson-spin-lock";
pub const MUTEX: &str = "ferrisson-mutex";

async fn clients(url: &str) -> Result<Vec<Client>, String> {
    let mut clients = Vec::new();
    for _ in 0..CONTENDED_CLIENTS {
        clients.push(Client::connect(url).await.map_err(|e| e.to_string())?);
    }
    Ok(clients)
}

async fn fair_cycles(url: &str, name: &str) -> Result<Vec<Box<dyn Cycle>>, String> {
    let mut cycles: Vec<Box<dyn Cycle>> = Vec::new();
    for client in clients(url).await? {
        for _ in 0..CONTENDED_TASKS {
            // One owner per worker, as a long-lived worker binds one: the fair lock's
            // per-owner channel then lingers between its waits.
            let lock = FairLock::new(&client, name)
                .map_err(|e| e.to_string())?
                .owned_by(client.new_owner());
            cycles.push(Box::new(HoldCycle(lock)));
        }
    }
    Ok(cycles)
}

/// 4 clients × 16 tasks, each with a handle `make` makes on its client (a fresh owner per
/// acquisition, as these kinds are used).
pub(crate) async fn kind_cycles<L, F>(url: &str, make: F) -> Result<Vec<Box<dyn Cycle>>, String>
where
    L: workload::Acquire,
    F: Fn(&Client) -> ferrisson::Result<L>,
{
    let mut cycles: Vec<Box<dyn Cycle>> = Vec::new();
    for client in clients(url).await? {
        for _ in 0..CONTENDED_TASKS {
            cycles.push(Box::new(HoldCycle(
                make(&client).map_err(|e| e.to_string())?,
            )));
        }
    }
    Ok(cycles)
}

async fn read_cycles(url: &str, name: &str) -> Result<Vec<Box<dyn Cycle>>, String> {
    let mut cycles: Vec<Box<dyn Cycle>> = Vec::new();
    for client in clients(url).await? {
        for _ in 0..CONTENDED_TASKS {
            let lock = ReadWriteLock::new(&client, name)
                .map_err(|e| e.to_string())?
                .owned_by(client.new_owner());
            cycles.push(Box::new(HoldCycle(lock.read_lock())));
        }
    }
    Ok(cycles)
}

/// Queues 32 waiters of 4 clients one by one behind a held fair lock, releases it, and counts
/// the waiters that got it out of their queue order.
async fn fifo_inversions(url: &str, name: &str) -> Result<usize, String> {
    let clients = clients(url).await?;
    let holder = FairLock::new(&clients[0], name).map_err(|e| e.to_string())?;
    let guard = holder.lock().await.map_err(|e| e.to_string())?;
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..32 {
        let lock = FairLock::new(&clients[i % clients.len()], name).map_err(|e| e.to_string())?;
        let order = order.clone();
        tasks.push(tokio::spawn(async move {
            let guard = lock.lock().await.map_err(|e| e.to_string())?;
            order.lock().map_err(|e| e.to_string())?.push(i);
            guard.unlock().await.map_err(|e| e.to_string())
        }));
        let deadline = after(Duration::from_secs(10))?;
        while holder.queue_length().await.map_err(|e| e.to_string())? < i + 1 {
            if Instant::now() > deadline {
                return Err(format!("waiter {i} never queued"));
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    guard.unlock().await.map_err(|e| e.to_string())?;
    for task in tasks {
        task.await.map_err(|e| e.to_string())??;
    }
    let order = order.lock().map_err(|e| e.to_string())?;
    Ok(order
        .iter()
        .enumerate()
        .filter(|(at, i)| *at != **i)
        .count())
}

/// One writer taking the write lock over and over among 64 readers: its waits.
/// Redisson's read lock, as it behaves: joins any read mode (a waiting ferrisson writer's
/// intent is unknown to it); `nil` when taken, else the lock's PTTL.
const REDISSON_READ_ACQUIRE: &str = r"
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  redis.call('hset', KEYS[1], 'mode', 'read')
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('set', KEYS[2] .. ':1', 1)
  redis.call('pexpire', KEYS[2] .. ':1', ARGV[1])
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if mode == 'read' then
  local held = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('set', KEYS[2] .. ':' .. held, 1)
  redis.call('pexpire', KEYS[2] .. ':' .. held, ARGV[1])
  redis.call('pexpire', KEYS[1], math.max(redis.call('pttl', KEYS[1]), tonumber(ARGV[1])))
  return nil
end
return redis.call('pttl', KEYS[1])
";

/// Redisson's read unlock, as it behaves: the hash lives on while another reader's hold lease
/// does; the last one deletes it and publishes `0`.
const REDISSON_READ_RELEASE: &str = r"
local held = redis.call('hget', KEYS[1], ARGV[1])
if held == false then
  return nil
end
local left = redis.call('hincrby', KEYS[1], ARGV[1], -1)
if left == 0 then
  redis.call('hdel', KEYS[1], ARGV[1])
end
redis.call('del', KEYS[3] .. ':' .. (left + 1))
if redis.call('hlen', KEYS[1]) > 1 then
  local longest = -3
  for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
    local count = tonumber(redis.call('hget', KEYS[1], field))
    if count then
      for i = count, 1, -1 do
        local ttl = redis.call('pttl', KEYS[4] .. ':' .. field .. ':rwlock_timeout:' .. i)
        longest = math.max(longest, ttl)
      end
    end
  end
  if longest > 0 then
    redis.call('pexpire', KEYS[1], longest)
    return 0
  end
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], '0')
return 1
";

/// 16 readers playing Redisson's, on one connection, until `until`: each takes a read hold
/// (retrying every millisecond while a writer holds the lock), holds it 1 ms, releases it.
async fn redisson_readers(url: &str, name: &str, until: Instant) -> Result<u64, String> {
    let client = redis::Client::open(url).map_err(|e| e.to_string())?;
    let con = client
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| e.to_string())?;
    let acquire = Arc::new(redis::Script::new(REDISSON_READ_ACQUIRE));
    let release = Arc::new(redis::Script::new(REDISSON_READ_RELEASE));
    let mut tasks = Vec::new();
    for task in 0..16 {
        let (mut con, acquire, release) = (con.clone(), acquire.clone(), release.clone());
        let name = name.to_owned();
        tasks.push(tokio::spawn(async move {
            let owner = format!("redisson-bench-{}:{task}", std::process::id());
            let hold_prefix = format!("{{{name}}}:{owner}:rwlock_timeout");
            let mut holds = 0u64;
            while Instant::now() < until {
                let refused: Option<i64> = acquire
                    .key(&name)
                    .key(&hold_prefix)
                    .arg(30_000)
                    .arg(&owner)
                    .invoke_async(&mut con)
                    .await
                    .map_err(|e| e.to_string())?;
                tokio::time::sleep(Duration::from_millis(1)).await;
                if refused.is_none() {
                    holds += 1;
                    let _: Option<i64> = release
                        .key(&name)
                        .key(format!("redisson_rwlock:{{{name}}}"))
                        .key(&hold_prefix)
                        .key(format!("{{{name}}}"))
                        .arg(&owner)
                        .invoke_async(&mut con)
                        .await
                        .map_err(|e| e.to_string())?;
                }
            }
            Ok::<u64, String>(holds)
        }));
    }
    let mut holds = 0;
    for task in tasks {
        holds += task.await.map_err(|e| e.to_string())??;
    }
    Ok(holds)
}

/// A writer taking the lock again and again until `until`, waiting at most 2 s each time:
/// its waits (a timeout counts as 2 s) and how many timed out.
async fn bounded_writer_waits(
    lock: ReadWriteLock,
    until: Instant,
) -> Result<(Latencies, u64), String> {
    let (mut waits, mut timeouts) = (Latencies::default(), 0);
    let options = ferrisson::AcquireOptions::new().with_wait(Duration::from_secs(2));
    while Instant::now() < until {
        let t0 = Instant::now();
        match lock
            .write_lock()
            .try_lock_with(options)
            .await
            .map_err(|e| e.to_string())?
        {
            Some(guard) => {
                waits.record(t0.elapsed());
                guard.unlock().await.map_err(|e| e.to_string())?;
            }
            None => {
                waits.record(t0.elapsed());
                timeouts += 1;
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok((waits, timeouts))
}

async fn writer_waits(lock: ReadWriteLock, until: Instant) -> Result<Latencies, String> {
    let mut waits = Latencies::default();
    while Instant::now() < until {
        let t0 = Instant::now();
        let guard = lock.write_lock().lock().await.map_err(|e| e.to_string())?;
        waits.record(t0.elapsed());
        guard.unlock().await.map_err(|e| e.to_string())?;
        // Let the readers back in before the next write.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(waits)
}

pub async fn run(ctx: &Ctx, records: &mut Records) -> Result<(), String> {
    for hold in HOLDS {
        let name = format!("bench:contended-fair:{}", super::hold_variant(hold));
        let figures = measure(ctx, hold, || fair_cycles(&ctx.url, &name)).await?;
        record(records, hold, FAIR, &figures);
    }
    for hold in HOLDS {
        let name = format!("bench:contended-spin:{}", super::hold_variant(hold));
        let figures = measure(ctx, hold, || {
            kind_cycles(&ctx.url, |client| SpinLock::new(client, &name))
        })
        .await?;
        record(records, hold, SPIN, &figures);
        let name = format!("bench:contended-mutex:{}", super::hold_variant(hold));
        let figures = measure(ctx, hold, || {
            kind_cycles(&ctx.url, |client| LeanMutex::new(client, &name))
        })
        .await?;
        record(records, hold, MUTEX, &figures);
    }
    let inversions = fifo_inversions(&ctx.url, "bench:fifo").await?;
    records.push(
        "contended",
        "fifo-32-waiters",
        FAIR,
        "out_of_order",
        inversions as f64,
        "waiters",
    );
    ctx.probe.flushall().await?;

    let hold = Duration::ZERO;
    let figures = measure(ctx, hold, || read_cycles(&ctx.url, "bench:readers")).await?;
    let variant = "readers=64";
    records.push(
        "contended",
        variant,
        RWLOCK,
        "acquisitions_per_sec",
        figures.acquisitions_per_sec,
        "acq/s",
    );
    records.push(
        "contended",
        variant,
        RWLOCK,
        "p99_wait_us",
        figures.p99_wait_us,
        "us",
    );
    if let Some(c) = figures.commands_per_acquisition {
        records.push(
            "contended",
            variant,
            RWLOCK,
            "commands_per_acquisition",
            c,
            "cmd/acq",
        );
    }

    // Read-heavy: the same 64 readers, holding 1 ms each, and one writer among them.
    let readers = read_cycles(&ctx.url, "bench:read-heavy").await?;
    let writer_client = Client::connect(&ctx.url).await.map_err(|e| e.to_string())?;
    let writer =
        ReadWriteLock::new(&writer_client, "bench:read-heavy").map_err(|e| e.to_string())?;
    let phase = ctx.phase();
    let until = after(phase)?;
    let (reads, waits) = tokio::join!(
        workload::run(readers, phase, Duration::from_millis(1)),
        writer_waits(writer, until)
    );
    let (reads, mut waits) = (reads?, waits?);
    let variant = "read-heavy";
    records.push(
        "contended",
        variant,
        RWLOCK,
        "read_acquisitions_per_sec",
        reads.per_sec(),
        "acq/s",
    );
    records.push(
        "contended",
        variant,
        RWLOCK,
        "writer_p50_wait_us",
        waits.percentile(50.0),
        "us",
    );
    records.push(
        "contended",
        variant,
        RWLOCK,
        "writer_p99_wait_us",
        waits.percentile(99.0),
        "us",
    );
    ctx.probe.flushall().await?;

    // The same, with 16 more readers playing Redisson's: they ignore the waiting writer's
    // intent, so the writer can wait past its limit (docs/guarantees.md).
    let name = "bench:read-heavy-mixed";
    let readers = read_cycles(&ctx.url, name).await?;
    let writer = ReadWriteLock::new(&writer_client, name).map_err(|e| e.to_string())?;
    let until = after(phase)?;
    let (reads, waits, redisson) = tokio::join!(
        workload::run(readers, phase, Duration::from_millis(1)),
        bounded_writer_waits(writer, until),
        redisson_readers(&ctx.url, name, until)
    );
    let (reads, (mut waits, timeouts), redisson) = (reads?, waits?, redisson?);
    let variant = "read-heavy+redisson-readers";
    for (metric, value, unit) in [
        ("read_acquisitions_per_sec", reads.per_sec(), "acq/s"),
        (
            "redisson_reads_per_sec",
            redisson as f64 / phase.as_secs_f64(),
            "acq/s",
        ),
        ("writer_p50_wait_us", waits.percentile(50.0), "us"),
        ("writer_p99_wait_us", waits.percentile(99.0), "us"),
        ("writer_timeouts_2s", timeouts as f64, "waits"),
    ] {
        records.push("contended", variant, RWLOCK, metric, value, unit);
    }
    ctx.probe.flushall().await
}

/// The moment `d` from now, or an error when the clock cannot hold it.
fn after(d: Duration) -> Result<Instant, String> {
    Instant::now()
        .checked_add(d)
        .ok_or_else(|| format!("a deadline {d:?} from now is past what the clock can hold"))
}
