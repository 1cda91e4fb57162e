//! The rules that turn what a server shows into verdicts, one function per area of a
//! [`DeploymentReport`].

use super::{Area, DeploymentReport, Info, Verdict, version};

pub(crate) fn eviction(report: &mut DeploymentReport, node: Option<&str>, info: &Info) {
    let policy = info.get("maxmemory_policy").map(String::as_str);
    let limit = info
        .get("maxmemory")
        .and_then(|m| m.parse::<u64>().ok())
        .unwrap_or(0);
    let fix = Some(
        "CONFIG SET maxmemory-policy noeviction (and in the server's configuration file): a full server then refuses writes, and acquires fail loudly",
    );
    let (verdict, detail, fix) = match policy {
        None => (
            Verdict::Unchecked,
            "`INFO` shows no maxmemory_policy".to_owned(),
            None,
        ),
        Some("noeviction") => (
            Verdict::Kept,
            "maxmemory-policy noeviction: no key is evicted; a full server refuses writes"
                .to_owned(),
            None,
        ),
        Some(p) if limit == 0 => (
            Verdict::Weakened,
            format!(
                "maxmemory-policy {p}, with no maxmemory set: nothing is evicted until a limit is set"
            ),
            fix,
        ),
        Some(p) if p.starts_with("volatile") => (
            Verdict::Broken,
            format!(
                "maxmemory-policy {p} evicts keys with an expiry first: exactly the lock holds and leased permits, silently, when memory runs out"
            ),
            fix,
        ),
        Some(p) => (
            Verdict::Broken,
            format!(
                "maxmemory-policy {p} can evict any key, lock holds and permit counts included, silently, when memory runs out"
            ),
            fix,
        ),
    };
    report.push(Area::Eviction, node, verdict, detail, fix);
}

pub(crate) fn persistence(
    report: &mut DeploymentReport,
    node: Option<&str>,
    info: &Info,
    fsync: Option<&str>,
    save: Option<&str>,
) {
    let aof = info.get("aof_enabled").map(String::as_str) == Some("1");
    let loses = "holds, permit counts, fencing counters and latch participants";
    let (verdict, detail, fix) = match (aof, fsync, save) {
        (true, Some("always"), _) => (
            Verdict::Kept,
            "AOF with appendfsync always: a restart keeps every acknowledged write".to_owned(),
            None,
        ),
        (true, Some("everysec"), _) => (
            Verdict::Weakened,
            format!(
                "AOF with appendfsync everysec: a crash loses up to a second of writes ({loses} taken in it)"
            ),
            Some(
                "appendfsync always closes the window, at a cost per write; fenced locks and the semaphores' limits cover what it leaves (docs/guarantees.md §9, §10)",
            ),
        ),
        (true, Some(other), _) => (
            Verdict::Weakened,
            format!(
                "AOF with appendfsync {other}: a crash loses what the OS had not written yet (often 30 s of {loses})"
            ),
            Some("appendfsync everysec or always"),
        ),
        (true, None, _) => (
            Verdict::Unchecked,
            "AOF on; its appendfsync could not be read (`CONFIG GET` refused)".to_owned(),
            Some("allow `CONFIG GET` to the checking user, or check appendfsync by hand"),
        ),
        (false, _, Some(save)) if !save.trim().is_empty() => (
            Verdict::Broken,
            format!(
                "RDB snapshots only (save {save}): a restart loses every write since the last snapshot ({loses})"
            ),
            Some("appendonly yes with appendfsync everysec or always"),
        ),
        (false, _, Some(_)) => (
            Verdict::Broken,
            format!(
                "no persistence: a restart loses every write ({loses}): every lock is free at once"
            ),
            Some(
                "appendonly yes with appendfsync everysec or always; until then, fenced locks and the semaphores' limits keep what they can (docs/guarantees.md §3, §9, §10)",
            ),
        ),
        // Whether RDB snapshots are taken is unknown: either way a restart loses writes.
        (false, _, None) => (
            Verdict::Broken,
            format!(
                "no AOF: a restart loses every write since the last RDB snapshot, if any ({loses})"
            ),
            Some("appendonly yes with appendfsync everysec or always"),
        ),
    };
    report.push(Area::Persistence, node, verdict, detail, fix);
}

pub(crate) fn replication(
    report: &mut DeploymentReport,
    node: Option<&str>,
    info: &Info,
    min_replicas: Option<&str>,
    replica_sync: bool,
) {
    let role = info.get("role").map(String::as_str).unwrap_or("unknown");
    if role != "master" {
        report.push(
            Area::Replication,
            node,
            Verdict::Broken,
            format!("this server's role is {role}: locks must be taken on a primary"),
            Some("point the client at the primary (or at Sentinel, which finds it)"),
        );
        return;
    }
    let replicas = info
        .get("connected_slaves")
        .and_then(|n| n.parse::<u32>().ok())
        .unwrap_or(0);
    // `INFO` shows min_slaves_good_slaves only while min-replicas-to-write is above 0.
    let min = min_replicas
        .and_then(|m| m.parse::<u32>().ok())
        .unwrap_or(u32::from(info.contains_key("min_slaves_good_slaves")));
    let waitaof = version(info).is_some_and(|v| v >= (7, 2));
    let (verdict, detail, fix) = if replicas == 0 {
        (
            Verdict::Kept,
            "a primary without replicas: a failover has nothing to promote (a restart is the persistence check's case)".to_owned(),
            None,
        )
    } else if replica_sync {
        (
            Verdict::Kept,
            format!(
                "{replicas} replica(s); every acquire, renewal and release waits for them (`{}`): a crash right after a grant does not take it away",
                if waitaof {
                    "WAIT, or WAITAOF with an AOF"
                } else {
                    "WAIT"
                }
            ),
            None,
        )
    } else if min > 0 {
        (
            Verdict::Weakened,
            format!(
                "{replicas} replica(s) and min-replicas-to-write {min}, but this client does not wait for them: a failover can lose the grants of the replicas' last lag (up to min-replicas-max-lag)"
            ),
            Some(
                "ClientConfig::with_replica_sync(ReplicaSync::default()) waits for every replica after each call",
            ),
        )
    } else {
        (
            Verdict::Broken,
            format!(
                "{replicas} replica(s), min-replicas-to-write 0, and this client does not wait for them: a failover loses every grant the replicas had not received"
            ),
            Some(
                "ClientConfig::with_replica_sync(ReplicaSync::default()) waits for every replica after each call",
            ),
        )
    };
    report.push(Area::Replication, node, verdict, detail, fix);
}

pub(crate) fn server(
    report: &mut DeploymentReport,
    node: Option<&str>,
    info: &Info,
    lua: Option<String>,
) {
    let shown = info.get("redis_version").cloned().unwrap_or_default();
    if let Some(e) = lua {
        report.push(
            Area::Server,
            node,
            Verdict::Broken,
            format!(
                "Redis {shown}: a Lua script was refused ({e}); every synchronizer needs scripts"
            ),
            Some("allow `EVAL`/`EVALSHA` (`+@scripting`) and leave scripting enabled"),
        );
        return;
    }
    let (verdict, detail, fix) = match version(info) {
        None => (
            Verdict::Unchecked,
            "the server's version could not be read".to_owned(),
            None,
        ),
        Some(v) if v < (6, 2) => (
            Verdict::Broken,
            format!("Redis {shown}: ferrisson needs 6.2 or later"),
            Some("upgrade Redis"),
        ),
        Some(v) if v < (7, 0) => (
            Verdict::Weakened,
            format!(
                "Redis {shown}: the Mutex acquires with its script (its one-command acquire needs 7.0), and ACL checks and WAITAOF are unavailable"
            ),
            Some("Redis 7.2 or later"),
        ),
        Some(v) if v < (7, 2) => (
            Verdict::Kept,
            format!("Redis {shown}, scripts run; WAITAOF (replica sync to disk) needs 7.2"),
            None,
        ),
        Some(_) => (Verdict::Kept, format!("Redis {shown}, scripts run"), None),
    };
    report.push(Area::Server, node, verdict, detail, fix);
}

pub(crate) fn cluster(report: &mut DeploymentReport, info: Option<&Info>, namespace: &str) {
    let Some(info) = info else {
        report.push(
            Area::Cluster,
            None,
            Verdict::Unchecked,
            "`CLUSTER INFO` was refused",
            Some("allow `CLUSTER INFO` to the checking user"),
        );
        return;
    };
    let assigned = info
        .get("cluster_slots_assigned")
        .and_then(|n| n.parse::<u32>().ok())
        .unwrap_or(0);
    let ok = info
        .get("cluster_slots_ok")
        .and_then(|n| n.parse::<u32>().ok())
        .unwrap_or(0);
    let state = info.get("cluster_state").map_or("unknown", String::as_str);
    if assigned < 16384 || ok < 16384 || state != "ok" {
        report.push(
            Area::Cluster,
            None,
            Verdict::Broken,
            format!("cluster state {state}: {assigned} of 16384 slots assigned, {ok} served: synchronizers whose names hash to the others cannot be taken"),
            Some("assign every slot to a serving primary (`redis-cli --cluster fix`)"),
        );
    } else if namespace.contains('{') && namespace.contains('}') {
        report.push(
            Area::Cluster,
            None,
            Verdict::Weakened,
            format!("every slot is served, but the namespace `{namespace}` carries a hash tag: every synchronizer of this client lives on one slot, so one primary takes all their load and a failover of it stops them all"),
            Some("a namespace without `{…}` lets each synchronizer's keys share its own name's hash tag (docs/deployment.md, Redis Cluster)"),
        );
    } else {
        report.push(
            Area::Cluster,
            None,
            Verdict::Kept,
            "every slot is assigned and served; each synchronizer's keys share its own name's hash tag (one slot each, spread over the primaries)",
            None,
        );
    }
}

/// The slowest script's budget: how long a script may run before Redis answers `BUSY` to every
/// other client (`busy-reply-threshold`, `lua-time-limit` before 7.0; `None` when it could not
/// be read, which adds no finding). The synchronizers' scripts take microseconds, but a purge
/// of a long fair-lock queue or an inspection of many holders takes longer.
pub(crate) fn script_time_limit(
    report: &mut DeploymentReport,
    node: Option<&str>,
    limit_ms: Option<u64>,
) {
    let Some(limit) = limit_ms else {
        return;
    };
    let (verdict, detail, fix) = if limit == 0 {
        (
            Verdict::Kept,
            "no busy-reply-threshold: a long script never makes Redis answer BUSY".to_owned(),
            None,
        )
    } else if limit < 100 {
        (
            Verdict::Weakened,
            format!(
                "busy-reply-threshold {limit} ms: a script that runs longer (a purge of a long fair-lock queue, an inspection of many holders) makes Redis answer BUSY to every client meanwhile"
            ),
            Some("leave busy-reply-threshold at its default, 5000 ms"),
        )
    } else {
        (
            Verdict::Kept,
            format!(
                "busy-reply-threshold {limit} ms, far above what the synchronizers' scripts take"
            ),
            None,
        )
    };
    report.push(Area::Server, node, verdict, detail, fix);
}

#[cfg(test)]
mod tests {
    use super::super::parse_info;
    use super::*;

    fn info(pairs: &[(&str, &str)]) -> Info {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn info_is_read_as_fields() {
        let parsed = parse_info("# Server\r\nredis_version:7.0.15\r\nrole:master\r\n\r\n");
        assert_eq!(version(&parsed), Some((7, 0)));
        assert_eq!(parsed.get("role").map(String::as_str), Some("master"));
    }

    #[test]
    fn the_exit_code_follows_the_worst_verdict() {
        let mut report = DeploymentReport::default();
        assert_eq!(report.exit_code(), 0);
        report.push(Area::Latency, None, Verdict::Weakened, "x", None);
        assert_eq!(report.exit_code(), 0);
        report.push(Area::Clock, None, Verdict::Unchecked, "x", None);
        assert_eq!(report.exit_code(), 2);
        report.push(Area::Eviction, None, Verdict::Broken, "x", None);
        assert_eq!(report.exit_code(), 1);
    }

    #[test]
    fn a_hash_tag_in_the_namespace_puts_every_synchronizer_on_one_slot() {
        let served = info(&[
            ("cluster_state", "ok"),
            ("cluster_slots_assigned", "16384"),
            ("cluster_slots_ok", "16384"),
        ]);
        let mut report = DeploymentReport::default();
        cluster(&mut report, Some(&served), "billing:");
        assert_eq!(report.worst(), Verdict::Kept);
        let mut report = DeploymentReport::default();
        cluster(&mut report, Some(&served), "{billing}:");
        assert_eq!(report.worst(), Verdict::Weakened);
    }

    #[test]
    fn a_script_time_limit_below_a_tenth_of_a_second_is_a_window() {
        let mut report = DeploymentReport::default();
        script_time_limit(&mut report, None, None);
        assert!(report.findings.is_empty());
        script_time_limit(&mut report, None, Some(5000));
        assert_eq!(report.worst(), Verdict::Kept);
        script_time_limit(&mut report, None, Some(20));
        assert_eq!(report.worst(), Verdict::Weakened);
    }

    #[test]
    fn a_limit_of_zero_evicts_nothing_whatever_the_policy() {
        let mut report = DeploymentReport::default();
        eviction(
            &mut report,
            None,
            &info(&[("maxmemory_policy", "allkeys-lru"), ("maxmemory", "0")]),
        );
        assert_eq!(report.worst(), Verdict::Weakened);
    }
}
