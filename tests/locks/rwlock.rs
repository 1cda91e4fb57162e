//! The read-write lock against a real Redis.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common;

use ferrisson::Lock;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::*;
use ferrisson::{AcquireOptions, Error, LossReason};
use ferrisson_rwlock::{Mode, ReadWriteLock};
use redis::Commands;
use tokio::time::Instant;

const SOON: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_readers_share_it_and_a_waiting_writer_gets_in_after_the_last() {
    let redis = TestRedis::any();
    let name = unique_name("readers");
    let readers_client = client(&redis.url()).await;
    let writer_client = client(&redis.url()).await;

    let holding = Arc::new(AtomicUsize::new(0));
    let (leave_tx, _) = tokio::sync::broadcast::channel::<()>(1);
    let mut readers = Vec::new();
    for _ in 0..20 {
        let lock = ReadWriteLock::new(&readers_client, &name).unwrap();
        let holding = holding.clone();
        let mut leave = leave_tx.subscribe();
        readers.push(tokio::spawn(async move {
            let guard = lock.read_lock().lock().await.unwrap();
            holding.fetch_add(1, Ordering::SeqCst);
            let _ = leave.recv().await;
            holding.fetch_sub(1, Ordering::SeqCst);
            guard.unlock().await.unwrap();
        }));
    }
    eventually(SOON, "20 readers hold together", || async {
        holding.load(Ordering::SeqCst) == 20
    })
    .await;

    let writer_lock = ReadWriteLock::new(&writer_client, &name).unwrap();
    assert!(writer_lock.write_lock().try_lock().await.unwrap().is_none());
    let seen = holding.clone();
    let writer = tokio::spawn(async move {
        let guard = writer_lock.write_lock().lock().await.unwrap();
        let readers_left = seen.load(Ordering::SeqCst);
        guard.unlock().await.unwrap();
        readers_left
    });
    // The writer waits for as long as readers hold.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!writer.is_finished(), "the writer got in among readers");
    leave_tx.send(()).unwrap();
    join_within(SOON, "readers leave", readers).await;
    let readers_left = tokio::time::timeout(SOON, writer).await.unwrap().unwrap();
    assert_eq!(readers_left, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_waiting_for_a_writer_all_wake_on_its_release() {
    let redis = TestRedis::any();
    let name = unique_name("wake-all");
    let writer_client = client(&redis.url()).await;
    let readers_client = client(&redis.url()).await;
    let lock = ReadWriteLock::new(&writer_client, &name).unwrap();
    let write = lock.write_lock().lock().await.unwrap();

    let holding = Arc::new(AtomicUsize::new(0));
    let mut readers = Vec::new();
    for _ in 0..20 {
        let lock = ReadWriteLock::new(&readers_client, &name).unwrap();
        let holding = holding.clone();
        readers.push(tokio::spawn(async move {
            let guard = lock.read_lock().lock().await.unwrap();
            holding.fetch_add(1, Ordering::SeqCst);
            // Hold until all 20 hold at once.
            while holding.load(Ordering::SeqCst) < 20 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            guard.unlock().await.unwrap();
        }));
    }
    eventually(SOON, "readers subscribed", || async {
        readers_client.waiter_stats().1 == 20
    })
    .await;
    assert_eq!(holding.load(Ordering::SeqCst), 0);
    write.unlock().await.unwrap();
    // Woken by the one release, well before the lease-bound re-check (30 s) would.
    join_within(SOON, "all 20 readers hold together", readers).await;
    assert!(!lock.is_locked().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_downgrades_and_a_reader_cannot_upgrade() {
    let redis = TestRedis::any();
    let name = unique_name("downgrade");
    let a = client(&redis.url()).await;
    let b = client(&redis.url()).await;
    // Downgrade and the upgrade check need one owner on both sides: bind it.
    let lock = ReadWriteLock::new(&a, &name)
        .unwrap()
        .owned_by(a.new_owner());
    let other = ReadWriteLock::new(&b, &name).unwrap();

    let write = lock.write_lock().lock().await.unwrap();
    let read = lock.read_lock().lock().await.unwrap();
    assert_eq!(lock.mode().await.unwrap(), Some(Mode::Write));
    assert!(other.read_lock().try_lock().await.unwrap().is_none());
    write.unlock().await.unwrap();
    assert_eq!(lock.mode().await.unwrap(), Some(Mode::Read));
    // Now a read lock: others may read, nobody may write.
    let other_read = other
        .read_lock()
        .try_lock()
        .await
        .unwrap()
        .expect("read mode");
    let third = other.owned_by(b.new_owner());
    assert!(third.write_lock().try_lock().await.unwrap().is_none());
    other_read.unlock().await.unwrap();

    // The downgraded owner reads; asking to write again is an upgrade.
    let err = lock.write_lock().lock().await.unwrap_err();
    assert!(matches!(err, Error::WouldDeadlock(_)), "{err:?}");
    assert_eq!(lock.read_lock().hold_count().await.unwrap(), 1);
    assert_eq!(lock.mode().await.unwrap(), Some(Mode::Read));
    read.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());

    // A plain reader too.
    let other = other.owned_by(b.new_owner());
    let read = other.read_lock().lock().await.unwrap();
    let err = other
        .write_lock()
        .try_lock_with(AcquireOptions::new().with_wait(SOON))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::WouldDeadlock(_)), "{err:?}");
    read.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_read_side_is_locked_while_the_writer_also_reads() {
    // Redisson's `RReadLock.isLocked`: read mode, or write mode with a read hold beside the
    // writer's.
    let redis = TestRedis::any();
    let name = unique_name("read-side-locked");
    let a = client(&redis.url()).await;
    let lock = ReadWriteLock::new(&a, &name)
        .unwrap()
        .owned_by(a.new_owner());
    let (read_side, write_side) = (lock.read_lock(), lock.write_lock());

    let write = write_side.lock().await.unwrap();
    assert!(write_side.is_locked().await.unwrap());
    assert!(
        !read_side.is_locked().await.unwrap(),
        "only the writer holds"
    );
    let read = read_side.lock().await.unwrap();
    assert_eq!(lock.mode().await.unwrap(), Some(Mode::Write));
    assert!(read_side.is_locked().await.unwrap(), "the writer reads too");
    assert!(write_side.is_locked().await.unwrap());
    read.unlock().await.unwrap();
    assert!(
        !read_side.is_locked().await.unwrap(),
        "the read hold is gone"
    );
    let read = read_side.lock().await.unwrap();
    write.unlock().await.unwrap();
    assert!(
        read_side.is_locked().await.unwrap(),
        "downgraded: read mode"
    );
    assert!(!write_side.is_locked().await.unwrap());
    read.unlock().await.unwrap();
    assert!(!read_side.is_locked().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_readers_hold_expires_while_a_live_reader_keeps_its_own() {
    let redis = TestRedis::any();
    let name = unique_name("crashed-reader");
    let lease = Duration::from_millis(600);
    let live_client = client_with_lease(&redis.url(), lease).await;
    let writer_client = client(&redis.url()).await;
    let mut con = redis.connection();

    // A reader of a client that died: its hold and its lease key, as it left them.
    let dead = "1b8e7c00-dead-4000-8000-000000000000:3";
    let _: () = con.hset(&name, "mode", "read").unwrap();
    let _: () = con.hset(&name, dead, 1).unwrap();
    let dead_hold = format!("{{{name}}}:{dead}:rwlock_timeout:1");
    let _: () = con.set_ex(&dead_hold, 1, 1).unwrap();
    let _: () = con.pexpire(&name, 1000).unwrap();

    let live = ReadWriteLock::new(&live_client, &name).unwrap();
    let read = live.read_lock().lock().await.unwrap();
    let live_hold = format!("{{{name}}}:{}:rwlock_timeout:1", read.owner());

    // Three leases later the dead reader's lease key is gone, the live one's is renewed.
    let until = Instant::now() + lease * 3;
    while Instant::now() < until {
        tokio::time::sleep(lease / 4).await;
        assert!(read.ensure_held().is_ok());
    }
    let dead_ttl: i64 = con.pttl(&dead_hold).unwrap();
    let live_ttl: i64 = con.pttl(&live_hold).unwrap();
    assert_eq!(dead_ttl, -2, "the dead reader's hold expired");
    assert!(live_ttl > 0, "the live reader's hold is kept: {live_ttl}");
    assert!(live.is_locked().await.unwrap());

    // Once the live reader leaves, the dead one does not keep a writer out.
    let writer = ReadWriteLock::new(&writer_client, &name).unwrap();
    assert!(writer.write_lock().try_lock().await.unwrap().is_none());
    read.unlock().await.unwrap();
    let write = writer
        .write_lock()
        .try_lock_with(AcquireOptions::new().with_wait(SOON))
        .await
        .unwrap()
        .expect("only a dead reader was left");
    let fields: Vec<String> = con.hkeys(&name).unwrap();
    assert!(!fields.iter().any(|f| f == dead), "{fields:?}");
    write.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writers_of_four_clients_exclude_each_other() {
    let redis = TestRedis::any();
    let name = unique_name("writers");
    let counter_key = format!("{name}:counter");
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let c = client(&redis.url()).await;
        for _ in 0..4 {
            let lock = ReadWriteLock::new(&c, &name).unwrap();
            let url = redis.url();
            let counter_key = counter_key.clone();
            tasks.push(tokio::spawn(async move {
                let raw = redis::Client::open(url).unwrap();
                let mut con = raw.get_multiplexed_async_connection().await.unwrap();
                for _ in 0..5 {
                    let guard = lock.write_lock().lock().await.unwrap();
                    // Read, then write back: lost updates if two writers overlap.
                    let n: i64 = redis::AsyncCommands::get(&mut con, &counter_key)
                        .await
                        .unwrap_or(0);
                    tokio::task::yield_now().await;
                    let _: () = redis::AsyncCommands::set(&mut con, &counter_key, n + 1)
                        .await
                        .unwrap();
                    guard.unlock().await.unwrap();
                }
            }));
        }
    }
    join_within(SOON * 3, "80 write acquisitions", tasks).await;
    let mut con = redis.connection();
    let n: i64 = con.get(&counter_key).unwrap();
    assert_eq!(n, 80);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hold_counts_leases_tokens_and_force_unlock() {
    let redis = TestRedis::any();
    let name = unique_name("surface");
    let a = client(&redis.url()).await;
    let b = client(&redis.url()).await;
    let lock = ReadWriteLock::fenced(&a, &name)
        .unwrap()
        .owned_by(a.new_owner());

    let w1 = lock.write_lock().lock().await.unwrap();
    let w2 = lock.write_lock().lock().await.unwrap();
    assert!(w2.token() > w1.token());
    assert_eq!(lock.write_lock().hold_count().await.unwrap(), 2);
    assert_eq!(lock.read_lock().hold_count().await.unwrap(), 0);
    w2.unlock().await.unwrap();
    w1.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());

    let r1 = lock.read_lock().lock().await.unwrap();
    let r2 = lock.read_lock().lock().await.unwrap();
    assert_eq!(r1.token(), None);
    assert_eq!(lock.read_lock().hold_count().await.unwrap(), 2);
    assert!(lock.read_lock().is_held_by_current().await.unwrap());
    r1.unlock().await.unwrap();
    r2.unlock().await.unwrap();
    let err = r2_again(&lock).await;
    assert!(matches!(err, Error::NotOwner(_)), "{err:?}");

    // A read hold's fixed lease runs out too (the write side's: tests/locks/conformance.rs).
    let short = lock
        .read_lock()
        .lock_with(AcquireOptions::new().with_lease(Duration::from_millis(200)))
        .await
        .unwrap();
    assert_eq!(
        tokio::time::timeout(SOON, short.lost()).await.unwrap(),
        LossReason::LeaseExpired
    );

    // Force unlock frees it for a waiting writer; the holder is told.
    let held = lock.read_lock().lock().await.unwrap();
    let other = ReadWriteLock::fenced(&b, &name).unwrap();
    let waiting = other.clone();
    let writer = tokio::spawn(async move { waiting.write_lock().lock().await.unwrap() });
    eventually(SOON, "the writer waits", || async {
        b.waiter_stats().1 == 1
    })
    .await;
    assert!(other.force_unlock().await.unwrap());
    let write = tokio::time::timeout(SOON, writer).await.unwrap().unwrap();
    let err = held.unlock().await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::NotOwner(_) | Error::LeaseLost(LossReason::NotHeld)
        ),
        "{err:?}"
    );
    write.unlock().await.unwrap();
    assert!(!other.force_unlock().await.unwrap());
}

/// An unlock of a read hold the owner no longer has.
async fn r2_again(lock: &ReadWriteLock) -> Error {
    let guard = lock.read_lock().lock().await.unwrap();
    lock.force_unlock().await.unwrap();
    guard.unlock().await.unwrap_err()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_format_holders_interoperate() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    let mut con = redis.connection();

    // A Redisson reader: mode, its count, its hold lease key.
    let name = unique_name("redisson-read");
    let reader = "4a0b6a3e-1111-4222-8333-444455556666:41";
    let _: () = con.hset(&name, "mode", "read").unwrap();
    let _: () = con.hset(&name, reader, 1).unwrap();
    let _: () = con
        .pset_ex(format!("{{{name}}}:{reader}:rwlock_timeout:1"), 1, 30_000)
        .unwrap();
    let _: () = con.pexpire(&name, 30_000).unwrap();
    let lock = ReadWriteLock::new(&a, &name).unwrap();
    let read = lock
        .read_lock()
        .try_lock()
        .await
        .unwrap()
        .expect("readers share");
    let writer_owner = lock.owned_by(a.new_owner());
    assert!(
        writer_owner
            .write_lock()
            .try_lock()
            .await
            .unwrap()
            .is_none()
    );
    read.unlock().await.unwrap();
    assert!(
        lock.is_locked().await.unwrap(),
        "the Redisson reader still holds it"
    );
    let count: i64 = con.hget(&name, reader).unwrap();
    assert_eq!(count, 1);

    // A Redisson writer: mode write, "<owner>:write".
    let name = unique_name("redisson-write");
    let writer = "4a0b6a3e-1111-4222-8333-444455556666:42:write";
    let _: () = con.hset(&name, "mode", "write").unwrap();
    let _: () = con.hset(&name, writer, 1).unwrap();
    let _: () = con.pexpire(&name, 30_000).unwrap();
    let lock = ReadWriteLock::new(&a, &name).unwrap();
    assert!(lock.read_lock().try_lock().await.unwrap().is_none());
    let waiting = lock.clone();
    let reader_task = tokio::spawn(async move { waiting.read_lock().lock().await.unwrap() });
    eventually(SOON, "the reader waits", || async {
        a.waiter_stats().1 == 1
    })
    .await;
    // Redisson's write unlock: delete, publish 1 on redisson_rwlock:{name}.
    let _: () = con.del(&name).unwrap();
    let _: () = con
        .publish(format!("redisson_rwlock:{{{name}}}"), 1)
        .unwrap();
    let read = tokio::time::timeout(SOON, reader_task)
        .await
        .unwrap()
        .unwrap();
    let mode: String = con.hget(&name, "mode").unwrap();
    assert_eq!(mode, "read");
    read.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_and_wrong_types_get_clear_errors() {
    let redis = TestRedis::any();
    let a = client(&redis.url()).await;
    assert!(matches!(
        ReadWriteLock::new(&a, ""),
        Err(Error::InvalidArgument(_))
    ));
    let lock = ReadWriteLock::new(&a, &unique_name("bad")).unwrap();
    assert!(matches!(
        lock.read_lock()
            .lock_with(AcquireOptions::new().with_lease(Duration::ZERO))
            .await,
        Err(Error::InvalidArgument(_))
    ));
    let name = unique_name("string");
    let mut con = redis.connection();
    let _: () = con.set(&name, "not a lock").unwrap();
    let lock = ReadWriteLock::new(&a, &name).unwrap();
    let err = lock.read_lock().lock().await.unwrap_err();
    assert!(matches!(err, Error::WrongType { .. }), "{err:?}");
    let err = lock.write_lock().lock().await.unwrap_err();
    assert!(matches!(err, Error::WrongType { .. }), "{err:?}");
    let _: String = con.get(&name).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_lock_futures_leak_no_hold() {
    let redis = TestRedis::any();
    let name = unique_name("dropped");
    let a = client(&redis.url()).await;
    let b = client(&redis.url()).await;
    let lock = ReadWriteLock::new(&a, &name).unwrap();
    let other = ReadWriteLock::new(&b, &name).unwrap();
    drop_calls_at_every_stage(
        40,
        || async { other.write_lock().lock().await.unwrap() },
        |i| {
            let call = lock.owned_by(a.new_owner());
            async move {
                if i % 4 < 2 {
                    call.read_lock().lock().await.map(drop)
                } else {
                    call.write_lock().lock().await.map(drop)
                }
            }
        },
    )
    .await;
    eventually(SOON, "no hold left", || async {
        !lock.is_locked().await.unwrap()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_of_readers_cannot_starve_a_writer() {
    let redis = TestRedis::any();
    let name = unique_name("starve");
    let readers_client = client(&redis.url()).await;
    let writer_client = client(&redis.url()).await;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut readers = Vec::new();
    // Overlapping readers: the lock never leaves read mode on its own.
    for _ in 0..8 {
        let lock = ReadWriteLock::new(&readers_client, &name).unwrap();
        let stop = stop.clone();
        readers.push(tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let guard = lock.read_lock().lock().await.unwrap();
                tokio::time::sleep(Duration::from_millis(3)).await;
                guard.unlock().await.unwrap();
            }
        }));
    }
    let writer = ReadWriteLock::new(&writer_client, &name).unwrap();
    eventually(SOON, "readers hold", || async {
        writer.is_locked().await.unwrap()
    })
    .await;
    for _ in 0..3 {
        let guard = writer
            .write_lock()
            .try_lock_with(AcquireOptions::new().with_wait(SOON))
            .await
            .unwrap()
            .expect("the writer gets in among a stream of readers");
        guard.unlock().await.unwrap();
    }
    stop.store(true, Ordering::SeqCst);
    join_within(SOON, "readers stop", readers).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_that_gives_up_stops_holding_readers_back() {
    let redis = TestRedis::any();
    let name = unique_name("intent");
    let a = client(&redis.url()).await;
    let b = client(&redis.url()).await;
    let reader = ReadWriteLock::new(&a, &name)
        .unwrap()
        .owned_by(a.new_owner());
    let read = reader.read_lock().lock().await.unwrap();
    let writer = ReadWriteLock::new(&b, &name).unwrap();
    let intent = format!("redisson_rwlock_writer:{{{name}}}");

    let waiting = writer.clone();
    let pending = tokio::spawn(async move { waiting.write_lock().lock().await.map(drop) });
    eventually(SOON, "the writer announces itself", || async {
        let n: i64 = redis.connection().exists(&intent).unwrap();
        n == 1
    })
    .await;
    // A new reader waits behind the writer; the one reading already re-enters.
    let newcomer = reader.owned_by(a.new_owner());
    assert!(newcomer.read_lock().try_lock().await.unwrap().is_none());
    let again = reader
        .read_lock()
        .try_lock()
        .await
        .unwrap()
        .expect("re-entry");
    again.unlock().await.unwrap();

    pending.abort();
    eventually(SOON, "the intent is withdrawn", || async {
        let n: i64 = redis.connection().exists(&intent).unwrap();
        n == 0
    })
    .await;
    let late = newcomer
        .read_lock()
        .try_lock()
        .await
        .unwrap()
        .expect("no writer waits");
    late.unlock().await.unwrap();
    read.unlock().await.unwrap();
}
