//! The double deduction, replayed and stopped.
//!
//! With Redisson, a holder whose lease ran out while it was paused (a GC pause, a stalled
//! runtime) only gets "Can't update lock expiration" in a log and goes on: a second holder
//! gets in, and the money is deducted twice. Here:
//!
//! 1. worker A takes a fenced lock (token t1) and reads the balance;
//! 2. A's process stalls past its lease, so Redis lets the lock go;
//! 3. worker B takes the lock (token t2 > t1) and writes twice under it (a deduction, then a
//!    fee), each write carrying `(t2, 1)` and `(t2, 2)`: both accepted;
//! 4. A wakes up: its guard says the lock was lost, and when A writes anyway, the ledger
//!    rejects `(t1, 1)` because t1 is older than the token it has already seen.
//!
//! A hold that writes several times numbers its writes: the resource accepts a write only when
//! its `(token, sequence)` pair is greater than the last it accepted (token first). A bare
//! "token strictly greater" rule would refuse the holder's own second write.
//!
//! ```text
//! cargo run --example fenced_update      # starts a throwaway redis-server unless REDIS_URL is set
//! ```
//!
//! Pasted into an app of your own (as `src/main.rs`), it needs:
//!
//! ```toml
//! [dependencies]
//! ferrisson = { version = "0.1", features = ["dev"] }
//! tokio = { version = "1", features = ["rt", "rt-multi-thread", "time"] }
//! ```
#![allow(clippy::print_stdout)]

use ferrisson::Lock;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferrisson::dev::RedisServer;
use ferrisson::{Client, ClientConfig, FencedLock};

const LEASE: Duration = Duration::from_millis(1_000);

/// The protected resource: it remembers the highest `(token, sequence)` it has accepted and
/// rejects a write carrying an older or equal pair. A hold's writes share its token and count
/// up their sequence from 1; a newer holder's token is greater, whatever its sequence. (A
/// database row with `fence` and `fence_seq` columns works the same way:
/// `UPDATE … SET balance = ?, fence = ?, fence_seq = ? WHERE id = ? AND (fence, fence_seq) < (?, ?)`.)
#[derive(Debug)]
struct Ledger {
    balance: i64,
    highest: (u64, u32),
}

impl Ledger {
    fn deduct(&mut self, who: &str, amount: i64, seen_balance: i64, fence: (u64, u32)) -> bool {
        // Strictly greater: an equal pair is a replay of a write this ledger has served.
        if fence <= self.highest {
            println!(
                "  ledger: REJECTED {who}'s write with token {} #{} (already saw {} #{})",
                fence.0, fence.1, self.highest.0, self.highest.1
            );
            return false;
        }
        self.highest = fence;
        self.balance = seen_balance - amount;
        println!(
            "  ledger: {who} took {amount} with token {} #{}; balance {}",
            fence.0, fence.1, self.balance
        );
        true
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (_server, url) = RedisServer::from_env_or_spawn()?;
    let name = format!("fenced-update:{}", std::process::id());
    let ledger = Arc::new(Mutex::new(Ledger {
        balance: 100,
        highest: (0, 0),
    }));

    // Worker A runs on a single-threaded runtime of its own, so that blocking its thread
    // stalls everything in it, its watchdog included: the Rust cousin of a GC pause.
    let a = {
        let (url, name, ledger) = (url.clone(), name.clone(), ledger.clone());
        std::thread::spawn(move || -> Result<bool, String> {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime.block_on(async move {
                let client = Client::with_config(ClientConfig::new(&url).with_lease(LEASE))
                    .await
                    .map_err(|e| e.to_string())?;
                let lock = FencedLock::new(&client, &name).map_err(|e| e.to_string())?;
                let guard = lock.lock().await.map_err(|e| e.to_string())?;
                let token = guard.token();
                let seen = ledger.lock().map_err(|e| e.to_string())?.balance;
                println!(
                    "A: took the lock with token {token}, read balance {seen}; now stalling..."
                );
                std::thread::sleep(LEASE * 3);
                println!("A: awake again");
                // The check a careful holder makes before writing...
                match guard.ensure_held() {
                    Ok(()) => println!("A: guard says the lock is still held"),
                    Err(e) => println!("A: guard says: {e}"),
                }
                let lost = guard.is_lost();
                // ...and the fence that protects even a careless one.
                let accepted =
                    ledger
                        .lock()
                        .map_err(|e| e.to_string())?
                        .deduct("A", 30, seen, (token, 1));
                let _ = guard.unlock().await;
                let _ = client.shutdown().await;
                Ok(lost && !accepted)
            })
        })
    };

    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let client = Client::connect(&url).await?;
        let lock = FencedLock::new(&client, &name)?;
        // Wait until A holds the lock, then queue up behind it.
        while !lock.is_locked().await? {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let guard = lock.lock().await?;
        let token = guard.token();
        println!("B: got the lock after A's lease ran out, token {token}");
        // Two writes under one hold: the same token, the sequence counting up.
        let mut accepted = 0;
        for (seq, amount) in [(1, 30), (2, 1)] {
            let mut ledger = ledger.lock().map_err(|e| e.to_string())?;
            let seen = ledger.balance;
            accepted += usize::from(ledger.deduct("B", amount, seen, (token, seq)));
        }
        if accepted != 2 {
            return Err("the holder's own second write was refused".into());
        }
        guard.unlock().await?;
        client.shutdown().await?;
        Ok::<_, Box<dyn std::error::Error>>(())
    })?;

    let a_stopped = a.join().map_err(|_| "worker A panicked")??;
    let balance = ledger.lock().map_err(|e| e.to_string())?.balance;
    println!("final balance: {balance} (deducted once, fee once)");
    if !a_stopped || balance != 69 {
        return Err("the stale holder was not stopped".into());
    }
    Ok(())
}
