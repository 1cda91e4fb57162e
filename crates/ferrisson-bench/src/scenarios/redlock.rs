//! `redlock`: ferrisson's `RedLock` (over reentrant locks, and over lean mutexes) against
//! `rslock` on the same 3 redis-server processes, uncontended (16 tasks, distinct keys) and
//! contended (4 clients × 8 tasks, one key), head to head in rounds where each goes first in
//! its turn.

use std::time::Duration;

use ferrisson::{AnyLock, Client, Mutex as LeanMutex, RedLock, ReentrantLock};
use ferrisson_testkit::RedisServer;
use rslock::LockManager;
use tokio::time::Instant;

use super::rslock_peer::RslockCycle;
use super::rslock_peer::{self, ceiling_connections, handoff_ceiling};
use super::uncontended::median;
use super::{Ctx, raw};
use crate::record::Records;
use crate::workload::{self, BoxFuture, Cycle};

pub(super) struct Ours(pub(super) RedLock);

impl Cycle for Ours {
    fn cycle(&self, hold: Duration) -> BoxFuture<'_, Result<Duration, String>> {
        Box::pin(async move {
            let t0 = Instant::now();
            let guard = self.0.lock().await.map_err(|e| e.to_string())?;
            let waited = t0.elapsed();
            workload::hold_for(hold).await?;
            guard.unlock().await.map_err(|e| e.to_string())?;
            Ok(waited)
        })
    }
}

/// A RedLock over `name` on every client's server: of lean mutexes when `mutexes`, else of
/// reentrant locks.
pub(super) fn red_lock(clients: &[Client], name: &str, mutexes: bool) -> Result<RedLock, String> {
    let locks = clients
        .iter()
        .map(|c| {
            let lock: ferrisson::Result<Box<dyn AnyLock>> = if mutexes {
                LeanMutex::new(c, name).map(|l| Box::new(l) as Box<dyn AnyLock>)
            } else {
                ReentrantLock::new(c, name).map(|l| Box::new(l) as Box<dyn AnyLock>)
            };
            lock.map_err(|e| e.to_string())
        })
        .collect::<Result<Vec<_>, _>>()?;
    RedLock::new(locks).map_err(|e| e.to_string())
}

pub(super) async fn clients(urls: &[String]) -> Result<Vec<Client>, String> {
    let mut clients = Vec::new();
    for url in urls {
        clients.push(Client::connect(url).await.map_err(|e| e.to_string())?);
    }
    Ok(clients)
}

pub async fn run(ctx: &Ctx, records: &mut Records) -> Result<(), String> {
    let servers = tokio::task::spawn_blocking(|| {
        (0..3)
            .map(|_| RedisServer::try_spawn())
            .collect::<Result<Vec<_>, _>>()
    })
    .await
    .map_err(|e| e.to_string())??;
    let urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
    let ceiling_cons = ceiling_connections(&urls).await?;
    let (rounds, round) = ctx.pick(
        (6, Duration::from_secs(1)),
        (3, Duration::from_millis(400)),
        (1, Duration::from_millis(200)),
    );
    // (variant, clients, tasks per client, one key or one per task)
    for (variant, n_clients, tasks, shared) in [
        ("uncontended tasks=16", 1usize, 16usize, false),
        ("contended hold=0ms", 4, 8, true),
    ] {
        let mut ours_total = workload::RunResult::default();
        let mut lean_total = workload::RunResult::default();
        let mut theirs_total = workload::RunResult::default();
        let mut raw_total = workload::RunResult::default();
        let (mut ratios, mut lean_ratios, mut raw_ratios) = (Vec::new(), Vec::new(), Vec::new());
        for r in 0..rounds {
            let mut ours: Vec<Box<dyn Cycle>> = Vec::new();
            let mut lean: Vec<Box<dyn Cycle>> = Vec::new();
            let mut theirs: Vec<Box<dyn Cycle>> = Vec::new();
            for c in 0..n_clients {
                let ours_clients = clients(&urls).await?;
                let manager = LockManager::new(urls.clone());
                for t in 0..tasks {
                    let name = if shared {
                        format!("bench:redlock:{variant}:{r}")
                    } else {
                        format!("bench:redlock:{variant}:{r}:{c}:{t}")
                    };
                    ours.push(Box::new(Ours(red_lock(&ours_clients, &name, false)?)));
                    lean.push(Box::new(Ours(red_lock(
                        &ours_clients,
                        &format!("{name}:mutex"),
                        true,
                    )?)));
                    theirs.push(Box::new(RslockCycle {
                        manager: manager.clone(),
                        resource: format!("{name}:rslock").into_bytes(),
                    }));
                }
            }
            // Who goes first goes round, as in the other head-to-head comparisons.
            let mut sides = workload::in_rotation(
                r,
                vec![
                    Box::pin(workload::run(ours, round, Duration::ZERO)),
                    Box::pin(workload::run(lean, round, Duration::ZERO)),
                    Box::pin(workload::run(theirs, round, Duration::ZERO)),
                ],
            )
            .await?
            .into_iter();
            let (Some(a), Some(m), Some(b)) = (sides.next(), sides.next(), sides.next()) else {
                return Err("a round came back short".to_owned());
            };
            ratios.push(a.per_sec() / b.per_sec().max(1e-9));
            lean_ratios.push(m.per_sec() / b.per_sec().max(1e-9));
            // The target's ceiling, against the same round's rslock. Uncontended, the
            // layout's: the same scripts' bare calls on every instance, no library around them
            // (they do not wait, so they have no contended form).
            if !shared {
                let cycles = raw::raw_red_cycles(&urls, &format!("redlock:{r}"), tasks).await?;
                let raw_round = workload::run(cycles, round, Duration::ZERO).await?;
                raw_ratios.push(raw_round.per_sec() / b.per_sec().max(1e-9));
                raw_total.merge(raw_round);
            } else {
                // Contended, the hand-off ceiling: one round trip to every instance at once per
                // change of hands.
                let ceiling = handoff_ceiling(
                    &ceiling_cons,
                    Duration::ZERO,
                    round.min(rslock_peer::HANDOFF_ROUND),
                )
                .await?;
                raw_ratios.push(ceiling / b.per_sec().max(1e-9));
            }
            ours_total.merge(a);
            lean_total.merge(m);
            theirs_total.merge(b);
        }
        let median_ratio = median(ratios);
        let mutex = super::lock_kinds::MUTEX;
        let mut sides = vec![
            ("ferrisson", &mut ours_total),
            (mutex, &mut lean_total),
            ("rslock", &mut theirs_total),
        ];
        if !shared {
            sides.push((raw::RAW_LIBRARY, &mut raw_total));
        }
        for (library, result) in sides {
            records.push(
                "redlock",
                variant,
                library,
                "ops_per_sec",
                result.per_sec(),
                "ops/s",
            );
            records.push(
                "redlock",
                variant,
                library,
                "p50_us",
                result.cycles.percentile(50.0),
                "us",
            );
        }
        records.push(
            "redlock",
            variant,
            "ferrisson",
            "ratio_to_rslock",
            median_ratio,
            "x",
        );
        records.push(
            "redlock",
            variant,
            mutex,
            "ratio_to_rslock",
            median(lean_ratios),
            "x",
        );
        // The ceiling: the bare calls uncontended, the hand-off ceiling contended.
        let ceiling = if shared {
            rslock_peer::HANDOFF_CEILING
        } else {
            raw::RAW_LIBRARY
        };
        records.push(
            "redlock",
            variant,
            ceiling,
            "ratio_to_rslock",
            median(raw_ratios),
            "x",
        );
    }
    drop(servers);
    Ok(())
}
