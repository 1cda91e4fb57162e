//! `cluster`: the lock workloads on a local Redis Cluster (3 primaries, 3 replicas) next to the
//! standalone server on the same machine, in alternating rounds; commands per contended
//! acquisition from `INFO commandstats` of every primary; subscriber connections for many
//! waiters spread over the slots.

use std::time::Duration;

use ferrisson::{Client, ClientConfig, Lock, ReentrantLock};

use ferrisson_testkit::RedisCluster;

use super::uncontended::{lock_cycles, median};
use super::{CONTENDED_CLIENTS, CONTENDED_TASKS, Ctx};
use crate::record::Records;
use crate::workload::{self, Cycle, HoldCycle};

const STANDALONE: &str = "ferrisson (standalone)";
const CLUSTER: &str = "ferrisson (cluster)";
const SYNCED: &str = "ferrisson (cluster, replica sync)";

fn rounds(ctx: &Ctx) -> (u32, Duration) {
    ctx.pick(
        (8, Duration::from_millis(500)),
        (3, Duration::from_millis(250)),
        (1, Duration::from_millis(150)),
    )
}

async fn connect(config: ClientConfig) -> Result<Client, String> {
    Client::with_config(config).await.map_err(|e| e.to_string())
}

/// Commands clients sent every primary of the cluster (`INFO commandstats`): the script calls,
/// subscriptions and `WAIT`s, the only commands a lock sends. `commandstats` also counts the
/// commands scripts run inside, which are not round trips.
fn cluster_commands(cluster: &RedisCluster) -> Result<u64, String> {
    const CLIENT_COMMANDS: [&str; 6] = [
        "evalsha",
        "eval",
        "ssubscribe",
        "sunsubscribe",
        "wait",
        "waitaof",
    ];
    let mut total = 0;
    for port in cluster.primary_ports() {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut cluster.node(port).connection())
            .map_err(|e| e.to_string())?;
        let calls = ferrisson_testkit::parse_command_calls(&info);
        total += CLIENT_COMMANDS
            .iter()
            .filter_map(|c| calls.get(*c))
            .sum::<u64>();
    }
    Ok(total)
}

pub async fn run(ctx: &Ctx, records: &mut Records) -> Result<(), String> {
    let cluster = tokio::task::spawn_blocking(RedisCluster::try_spawn)
        .await
        .map_err(|e| e.to_string())??;
    let standalone = connect(ClientConfig::new(&ctx.url)).await?;
    let plain = connect(ClientConfig::cluster(cluster.urls()).without_replica_sync()).await?;
    let synced = connect(ClientConfig::cluster(cluster.urls())).await?;
    let deployments = [
        (STANDALONE, &standalone),
        (CLUSTER, &plain),
        (SYNCED, &synced),
    ];

    // Uncontended lock + unlock on distinct keys (spread over the slots), rounds alternating
    // between the deployments.
    let (rounds, round) = rounds(ctx);
    for (variant, tasks) in [
        ("uncontended sequential", 1usize),
        ("uncontended tasks=64", 64),
    ] {
        let mut results: Vec<workload::RunResult> =
            (0..deployments.len()).map(|_| Default::default()).collect();
        let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); deployments.len()];
        for _ in 0..rounds {
            let mut per_round = Vec::new();
            for (i, (library, client)) in deployments.iter().enumerate() {
                let cycles =
                    lock_cycles(client, &format!("bench:cluster:{variant}:{library}"), tasks)?;
                let result = workload::run(cycles, round, Duration::ZERO).await?;
                per_round.push(result.per_sec());
                results[i].merge(result);
            }
            for (i, ops) in per_round.iter().enumerate() {
                ratios[i].push(ops / per_round[0].max(1e-9));
            }
        }
        for (i, (library, _)) in deployments.iter().enumerate() {
            let result = &mut results[i];
            records.push(
                "cluster",
                variant,
                library,
                "ops_per_sec",
                result.per_sec(),
                "ops/s",
            );
            records.push(
                "cluster",
                variant,
                library,
                "p50_us",
                result.cycles.percentile(50.0),
                "us",
            );
            if i > 0 {
                records.push(
                    "cluster",
                    variant,
                    library,
                    "ratio_to_standalone",
                    median(ratios[i].clone()),
                    "x",
                );
            }
        }
    }

    // Contended, hold 0: 4 clients × 16 tasks on one lock, on the cluster without replica sync
    // (commands per acquisition comparable with standalone's), from a long steady phase.
    let name = "bench:cluster:contended";
    let mut cycles: Vec<Box<dyn Cycle>> = Vec::new();
    for _ in 0..CONTENDED_CLIENTS {
        let client = connect(ClientConfig::cluster(cluster.urls()).without_replica_sync()).await?;
        for _ in 0..CONTENDED_TASKS {
            let lock = ReentrantLock::new(&client, name).map_err(|e| e.to_string())?;
            cycles.push(Box::new(HoldCycle(lock)));
        }
    }
    let before = cluster_commands(&cluster)?;
    let result = workload::run(cycles, ctx.phase(), Duration::ZERO).await?;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let commands = cluster_commands(&cluster)?.saturating_sub(before);
    let v = "contended hold=0ms";
    records.push(
        "cluster",
        v,
        CLUSTER,
        "acquisitions_per_sec",
        result.per_sec(),
        "acq/s",
    );
    records.push(
        "cluster",
        v,
        CLUSTER,
        "commands_per_acquisition",
        commands as f64 / result.total().max(1) as f64,
        "cmd/acq",
    );

    // Waiters spread over the slots: one subscriber connection per shard, however many.
    let waiters = ctx.pick(10_000, 2_000, 500);
    let names = waiters / 10;
    let holder = connect(ClientConfig::cluster(cluster.urls()).without_replica_sync()).await?;
    let waiting = connect(ClientConfig::cluster(cluster.urls()).without_replica_sync()).await?;
    let mut guards = Vec::new();
    for i in 0..names {
        let lock = ReentrantLock::new(&holder, &format!("bench:cluster:waiters:{i}"))
            .map_err(|e| e.to_string())?;
        guards.push(lock.lock().await.map_err(|e| e.to_string())?);
    }
    let mut tasks = Vec::new();
    for i in 0..waiters {
        let lock = ReentrantLock::new(&waiting, &format!("bench:cluster:waiters:{}", i % names))
            .map_err(|e| e.to_string())?;
        tasks.push(tokio::spawn(async move {
            let guard = lock.lock().await.map_err(|e| e.to_string())?;
            guard.unlock().await.map_err(|e| e.to_string())
        }));
    }
    let deadline = tokio::time::Instant::now()
        .checked_add(Duration::from_secs(60))
        .ok_or("the waiters' deadline is past the clock's range")?;
    while waiting.waiter_stats().1 < waiters {
        if tokio::time::Instant::now() > deadline {
            return Err(format!(
                "only {:?} of {waiters} waiters registered",
                waiting.waiter_stats()
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut subscribers = 0;
    for port in cluster.primary_ports() {
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query(&mut cluster.node(port).connection())
            .map_err(|e| e.to_string())?;
        subscribers += ferrisson_testkit::count_subscriber_connections(&list);
    }
    let v = format!("waiters={waiters}");
    records.push(
        "cluster",
        &v,
        CLUSTER,
        "subscriber_connections",
        subscribers as f64,
        "conn",
    );
    records.push(
        "cluster",
        &v,
        CLUSTER,
        "shards",
        cluster.primary_ports().len() as f64,
        "shards",
    );
    for guard in guards {
        guard.unlock().await.map_err(|e| e.to_string())?;
    }
    for task in tasks {
        task.await.map_err(|e| e.to_string())??;
    }
    Ok(())
}
