//! Names that do not collide, and tests run again as worker processes.

/// The Redis key or channel Redisson derives from an object's name with `prefix`
/// (`prefix:{name}`, or `prefix:name` when the name already carries a hash tag), written here
/// from `shared/PROTOCOL.md` rather than taken from the library, so that tests check the layout
/// against the protocol: `redisson_name("redisson_lock__channel", "orders")` is the channel a
/// release of lock `orders` publishes on.
pub fn redisson_name(prefix: &str, name: &str) -> String {
    if name.contains('{') {
        format!("{prefix}:{name}")
    } else {
        format!("{prefix}:{{{name}}}")
    }
}

/// A name no other test uses, for keys on a shared server.
pub fn unique_name(prefix: &str) -> String {
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    )
}

static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// This test binary again, as another process that runs only its ignored test `test` (a
/// worker's body), with `env` set, stdin closed, stdout piped and stderr inherited: how a test
/// plays other processes that hold, wait and die. Spawn it (and read its stdout) yourself.
#[allow(clippy::panic)]
pub fn rerun_test_as_process(test: &str, env: &[(&str, &str)]) -> std::process::Command {
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("this test's binary: {e}"));
    let mut command = std::process::Command::new(exe);
    command
        .args([
            test,
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit());
    command
}

/// The values of the environment variables `names`, all of them, in a worker process started
/// by [`rerun_test_as_process`]; `None` when one is missing (the worker test was run
/// directly: it has nothing to do).
pub fn worker_env<const N: usize>(names: [&str; N]) -> Option<[String; N]> {
    let mut values: [String; N] = std::array::from_fn(|_| String::new());
    for (value, name) in values.iter_mut().zip(names) {
        *value = std::env::var(name).ok()?;
    }
    Some(values)
}
