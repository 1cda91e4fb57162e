//! What the server counted: commands by name, subscriber connections.

/// `INFO commandstats` of the server `con` is connected to, as command → calls (panics, as a
/// test's setup does, when the server does not answer).
#[allow(clippy::panic)]
pub fn command_calls(con: &mut redis::Connection) -> std::collections::HashMap<String, u64> {
    match redis::cmd("INFO").arg("commandstats").query::<String>(con) {
        Ok(info) => parse_command_calls(&info),
        Err(e) => panic!("INFO commandstats: {e}"),
    }
}

/// The calls of `command` between two [`command_calls`] snapshots (panics when the count went
/// down: the server restarted or its stats were reset between them, and the difference means
/// nothing).
#[allow(clippy::panic)]
pub fn calls_between(
    before: &std::collections::HashMap<String, u64>,
    after: &std::collections::HashMap<String, u64>,
    command: &str,
) -> u64 {
    let count =
        |calls: &std::collections::HashMap<String, u64>| calls.get(command).copied().unwrap_or(0);
    match count(after).checked_sub(count(before)) {
        Some(calls) => calls,
        None => panic!("`{command}` calls went down between two snapshots: stats were reset"),
    }
}

/// Parses `INFO commandstats` into command → calls.
pub fn parse_command_calls(info: &str) -> std::collections::HashMap<String, u64> {
    info.lines()
        .filter_map(|line| {
            let (name, stats) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = stats
                .split(',')
                .find_map(|kv| kv.strip_prefix("calls="))?
                .parse()
                .ok()?;
            Some((name.to_owned(), calls))
        })
        .collect()
}

/// The calls of every command but `INFO` (which the measuring itself sends) in a
/// [`parse_command_calls`] snapshot.
pub fn total_calls(calls: &std::collections::HashMap<String, u64>) -> u64 {
    calls
        .iter()
        .filter(|(command, _)| command.as_str() != "info")
        .map(|(_, n)| n)
        .sum()
}

/// Counts the connections of a `CLIENT LIST` reply that hold a channel, pattern or shard
/// channel subscription.
pub fn count_subscriber_connections(client_list: &str) -> usize {
    client_list
        .lines()
        .filter(|line| {
            line.split(' ').any(|kv| {
                (kv.starts_with("sub=") || kv.starts_with("psub=") || kv.starts_with("ssub="))
                    && !kv.ends_with("=0")
            })
        })
        .count()
}
