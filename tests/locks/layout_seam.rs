//! A kind on Redisson's `RLock` hash with an acquire script of its own
//! (`HashLock::with_acquire`): what a non-reentrant lock needs from the core, with no code of its
//! own beyond its script. The script here refuses re-entry with the engine's
//! `REENTRY_REFUSED` reply; everything else (release, renewal, hand-off, waiting) is the
//! layout's.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common::{TestRedis, client, unique_name};
use ferrisson::{AcquireOptions, Error, Lock};
use ferrisson_core::__engine::{HashLock, LOCK_PRELUDE, LockHandle, LockType, Script};
use std::time::Duration;

/// Takes the lock for an owner that does not hold it (as `core/hash_lock_acquire` does, without
/// the resend branch), refuses the owner that does.
static REFUSING_ACQUIRE: Script = Script::with_prelude(
    "test/refusing_acquire",
    &LOCK_PRELUDE,
    r#"
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  return -2
end
if redis.call('exists', KEYS[1]) == 0 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  if not KEYS[2] then
    return 1
  end
  return {1, 1, next_token(KEYS[2])}
end
return {0, redis.call('pttl', KEYS[1])}
"#,
);

struct Refusing(LockHandle<HashLock>);

impl LockType for Refusing {
    type Kind = HashLock;

    fn handle(&self) -> &LockHandle<HashLock> {
        &self.0
    }
}

#[tokio::test]
async fn a_kind_with_its_own_acquire_script_refuses_re_entry_and_shares_the_rest() {
    let redis = TestRedis::any();
    let client = client(&redis.url()).await;
    let name = unique_name("seam");
    let kind = HashLock::new(&client, &name, true)
        .unwrap()
        .with_acquire(&REFUSING_ACQUIRE);
    let lock = Refusing(LockHandle::new(kind));
    let owner = client.new_owner();
    let bound = Refusing(lock.0.owned_by(owner.clone()));

    let guard = bound.lock().await.unwrap();
    let token = guard.token().unwrap();
    // Re-entry is an error naming the lock and the owner, at once, never a wait for itself.
    let again = bound
        .try_lock_with(AcquireOptions::new().with_wait(Duration::from_secs(30)))
        .await;
    match again {
        Err(Error::WouldDeadlock(message)) => {
            assert!(message.contains(&name), "{message}");
            assert!(message.contains(owner.as_str()), "{message}");
        }
        other => panic!("re-entry gave {other:?}"),
    }
    assert_eq!(
        bound.hold_count().await.unwrap(),
        1,
        "the refusal took nothing"
    );

    // Another owner waits, and the layout's release hands the lock over to it.
    let waiter = tokio::spawn({
        let lock = Refusing(lock.0.clone());
        async move { lock.lock().await }
    });
    tokio::task::yield_now().await;
    guard.unlock().await.unwrap();
    let next = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("the waiter got the lock after the release")
        .unwrap()
        .unwrap();
    assert!(next.token().unwrap() > token, "fencing tokens only grow");
    next.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
}
