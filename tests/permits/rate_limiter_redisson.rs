//! The rate limiter beside Redisson on one name, and Redisson's `RRateLimiter` calls:
//! keep-alive, `release`, `availablePermits`, `setRate`/`updateRate` with and without the
//! window's state, and the recount of a window that Redisson's `release` left behind.
//!
//! The Redisson side is played by this test: its transitions as Redisson performs them,
//! written here as our own scripts. Its acquire: permits given an interval ago or more (by the
//! client's clock, which Redisson passes in) come back to the value, and when that would pass
//! the rate the value is recounted as the rate less the permits of every member still in the
//! window; enough left → a member scored with the client's clock; then the keep-alive (or the
//! settings' TTL) is set on every key it used. Its `release(n)` (before Redisson took members
//! out of the window too): the value grows by `n`, up to the rate.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::*;
use ferrisson::Error;
use ferrisson_rate_limiter::{RateArgs, RateLimiter, RateType};
use redis::AsyncCommands;

const SOON: Duration = Duration::from_secs(10);

/// Redisson's acquire, as it behaves: `nil` when taken, else the ms until a permit returns.
/// KEYS: settings, value, this client's value, permits, this client's permits. ARGV: permits,
/// the client's clock (ms), random bytes.
const REDISSON_ACQUIRE: &str = r"
local rate = tonumber(redis.call('hget', KEYS[1], 'rate'))
local interval = tonumber(redis.call('hget', KEYS[1], 'interval'))
local valueName, permitsName = KEYS[2], KEYS[4]
if redis.call('hget', KEYS[1], 'type') == '1' then
  valueName, permitsName = KEYS[3], KEYS[5]
end
local wanted, now = tonumber(ARGV[1]), tonumber(ARGV[2])
local member = struct.pack('Bc0I', string.len(ARGV[3]), ARGV[3], wanted)
local current = redis.call('get', valueName)
local res = nil
if current == false then
  redis.call('set', valueName, rate)
  redis.call('zadd', permitsName, now, member)
  redis.call('decrby', valueName, wanted)
else
  current = tonumber(current)
  local released = 0
  for _, v in ipairs(redis.call('zrangebyscore', permitsName, 0, now - interval)) do
    local _, n = struct.unpack('Bc0I', v)
    released = released + n
  end
  if released > 0 then
    redis.call('zremrangebyscore', permitsName, 0, now - interval)
    if current + released > rate then
      local used = 0
      for _, v in ipairs(redis.call('zrange', permitsName, 0, -1)) do
        local _, n = struct.unpack('Bc0I', v)
        used = used + n
      end
      current = rate - used
    else
      current = current + released
    end
    redis.call('set', valueName, current)
  end
  if current < wanted then
    local first = redis.call('zrange', permitsName, 0, 0, 'withscores')
    res = 3 + interval - (now - tonumber(first[2]))
  else
    redis.call('zadd', permitsName, now, member)
    redis.call('decrby', valueName, wanted)
  end
end
local keep = tonumber(redis.call('hget', KEYS[1], 'keepAliveTime') or '0')
if keep > 0 then
  redis.call('pexpire', KEYS[1], keep)
  redis.call('pexpire', valueName, keep)
  redis.call('pexpire', permitsName, keep)
else
  local ttl = redis.call('pttl', KEYS[1])
  if ttl > 0 then
    redis.call('pexpire', valueName, ttl)
    redis.call('pexpire', permitsName, ttl)
  end
end
return res
";

/// Redisson's `release(n)` before it took members out of the window: the value grows by `n`,
/// up to the rate.
const REDISSON_OLD_RELEASE: &str = r"
local rate = tonumber(redis.call('hget', KEYS[1], 'rate'))
local valueName = KEYS[2]
if redis.call('hget', KEYS[1], 'type') == '1' then
  valueName = KEYS[3]
end
local current = tonumber(redis.call('get', valueName) or rate)
redis.call('set', valueName, math.min(current + tonumber(ARGV[1]), rate))
";

/// Redisson's `trySetRate(type, rate, interval, keepAlive)`.
const REDISSON_TRY_SET: &str = r"
redis.call('hsetnx', KEYS[1], 'rate', ARGV[1])
redis.call('hsetnx', KEYS[1], 'interval', ARGV[2])
redis.call('hsetnx', KEYS[1], 'keepAliveTime', ARGV[4])
local res = redis.call('hsetnx', KEYS[1], 'type', ARGV[3])
if res == 1 and tonumber(ARGV[4]) > 0 then
  redis.call('pexpire', KEYS[1], ARGV[4])
end
return res
";

/// A Redisson client on a limiter: its keys (its own client id for the per-client ones).
struct Redisson {
    con: redis::aio::MultiplexedConnection,
    keys: [String; 5],
}

impl Redisson {
    async fn new(url: &str, name: &str) -> Self {
        let con = redis::Client::open(url)
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let id = uuid::Uuid::new_v4();
        Self {
            con,
            keys: [
                name.to_owned(),
                format!("{{{name}}}:value"),
                format!("{{{name}}}:value:{id}"),
                format!("{{{name}}}:permits"),
                format!("{{{name}}}:permits:{id}"),
            ],
        }
    }

    async fn run(&mut self, script: &str, args: &[String]) -> redis::Value {
        let script = redis::Script::new(script);
        let mut invocation = script.prepare_invoke();
        for key in &self.keys {
            invocation.key(key);
        }
        for arg in args {
            invocation.arg(arg);
        }
        invocation.invoke_async(&mut self.con).await.unwrap()
    }

    /// `tryAcquire(n)`: `None` when taken, else the ms to wait.
    async fn try_acquire(&mut self, n: u32) -> Option<i64> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis();
        let random = uuid::Uuid::new_v4().simple().to_string();
        match self
            .run(
                REDISSON_ACQUIRE,
                &[n.to_string(), now.to_string(), random[..8].to_owned()],
            )
            .await
        {
            redis::Value::Nil => None,
            redis::Value::Int(ms) => Some(ms),
            other => panic!("Redisson's acquire replied {other:?}"),
        }
    }
}

async fn pttl(con: &mut redis::aio::MultiplexedConnection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query_async(con).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acquire_and_release_refreshes_the_keep_alive_as_redissons_do() {
    let redis = TestRedis::any();
    let client = client(&redis.url()).await;
    let name = unique_name("rate-keep-alive");
    let mut redisson = Redisson::new(&redis.url(), &name).await;
    // Redisson's trySetRate(OVERALL, 100, 1 s, keepAlive 1.5 s).
    let set = redisson
        .run(
            REDISSON_TRY_SET,
            &["100".into(), "1000".into(), "0".into(), "1500".into()],
        )
        .await;
    assert_eq!(set, redis::Value::Int(1));
    let limiter = RateLimiter::new(&client, &name).unwrap();
    let mut con = redisson.con.clone();
    // The keep-alive nearly ran out: an acquire makes every key live 1.5 s again.
    let _: bool = con.pexpire(&name, 100).await.unwrap();
    assert!(limiter.try_acquire(1).await.unwrap());
    for key in [&name, &redisson.keys[1], &redisson.keys[3]] {
        let left = pttl(&mut con, key).await;
        assert!((1000..=1500).contains(&left), "{key}: {left} ms");
    }
    let _: bool = con.pexpire(&name, 100).await.unwrap();
    limiter.release(1).await.unwrap();
    assert!(pttl(&mut con, &name).await > 1000, "a release refreshes it");
    // Nobody uses it: it goes by itself.
    let _: bool = con.pexpire(&name, 50).await.unwrap();
    let keys = redisson.keys.clone();
    eventually(SOON, "the limiter's keys expire", || async {
        let mut con = con.clone();
        for key in &keys {
            if pttl(&mut con, key).await != -2 {
                return false;
            }
        }
        true
    })
    .await;
    assert!(matches!(
        limiter.try_acquire(1).await,
        Err(Error::NotSetUp(_))
    ));

    // ferrisson's own: the keep-alive must cover an interval; Redisson reads ours.
    let interval = Duration::from_secs(1);
    for bad in [Duration::from_millis(999), Duration::MAX] {
        assert!(matches!(
            limiter
                .try_set_rate_with(RateArgs::new(RateType::Overall, 5, interval).keep_alive(bad))
                .await,
            Err(Error::InvalidArgument(_))
        ));
    }
    assert!(
        limiter
            .try_set_rate_with(
                RateArgs::new(RateType::Overall, 5, interval)
                    .keep_alive(Duration::from_millis(1500))
            )
            .await
            .unwrap()
    );
    let keep: String = con.hget(&name, "keepAliveTime").await.unwrap();
    assert_eq!(keep, "1500");
    assert!((1000..=1500).contains(&pttl(&mut con, &name).await));
    assert_eq!(redisson.try_acquire(1).await, None);
    assert_eq!(limiter.available_permits().await.unwrap(), 4);
    // Set again without one: the settings stay.
    limiter
        .set_rate(RateType::Overall, 5, interval)
        .await
        .unwrap();
    assert_eq!(pttl(&mut con, &name).await, -1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recount_after_redissons_release_counts_every_permit_still_in_the_window() {
    // Rate 10 per second: 1 permit at t0, 5 at t0 + 300 ms, Redisson's release(6), and at
    // t0 + 1100 ms a request for 9: Redisson recounts 10 − 5 and refuses; so must we.
    let redis = TestRedis::any();
    let client = client(&redis.url()).await;
    let name = unique_name("rate-recount");
    let mut redisson = Redisson::new(&redis.url(), &name).await;
    let limiter = RateLimiter::new(&client, &name).unwrap();
    assert!(
        limiter
            .try_set_rate(RateType::Overall, 10, Duration::from_secs(1))
            .await
            .unwrap()
    );
    assert!(limiter.try_acquire(1).await.unwrap());
    assert!(limiter.try_acquire(5).await.unwrap());
    // Move the window's clock on instead of sleeping: the first permit was given 1100 ms ago,
    // the five 800 ms ago.
    let mut con = redisson.con.clone();
    let (s, us): (u64, u64) = redis::cmd("TIME").query_async(&mut con).await.unwrap();
    let now = s * 1000 + us / 1000;
    let permits = redisson.keys[3].clone();
    let given: Vec<Vec<u8>> = con.zrange(&permits, 0, -1).await.unwrap();
    assert_eq!(given.len(), 2);
    for member in &given {
        // A member ends with its permits, 4 bytes little-endian.
        let at = if member.ends_with(&[1, 0, 0, 0]) {
            now - 1100
        } else {
            now - 800
        };
        let _: i64 = con.zadd(&permits, member, at).await.unwrap();
    }
    redisson.run(REDISSON_OLD_RELEASE, &["6".into()]).await;
    assert!(
        !limiter.try_acquire(9).await.unwrap(),
        "5 permits are still in the window"
    );
    assert_eq!(limiter.available_permits().await.unwrap(), 5);
    assert!(limiter.try_acquire(5).await.unwrap());
    assert_eq!(limiter.available_permits().await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_gives_permits_back_to_the_window_up_to_the_rate() {
    let redis = TestRedis::any();
    let client = client(&redis.url()).await;
    let name = unique_name("rate-release");
    let limiter = RateLimiter::new(&client, &name).unwrap();
    assert!(matches!(limiter.release(1).await, Err(Error::NotSetUp(_))));
    assert!(matches!(
        limiter.available_permits().await,
        Err(Error::NotSetUp(_))
    ));
    limiter
        .set_rate(RateType::Overall, 10, Duration::from_secs(3600))
        .await
        .unwrap();
    assert_eq!(limiter.available_permits().await.unwrap(), 10);
    assert!(limiter.try_acquire(1).await.unwrap());
    // The members are ordered by the server millisecond they were given in: two in one
    // millisecond would be ordered by their random bytes instead.
    tokio::time::sleep(Duration::from_millis(3)).await;
    assert!(limiter.try_acquire(5).await.unwrap());
    assert_eq!(limiter.available_permits().await.unwrap(), 4);
    // Three back: the oldest member (1) leaves the window, the next shrinks from 5 to 3.
    limiter.release(3).await.unwrap();
    assert_eq!(limiter.available_permits().await.unwrap(), 7);
    let mut con = redis.connection();
    let left: Vec<(Vec<u8>, f64)> =
        redis::Commands::zrange_withscores(&mut con, format!("{{{name}}}:permits"), 0, -1).unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].0.last(), Some(&0), "3 permits, little-endian");
    assert_eq!(left[0].0[left[0].0.len() - 4], 3);
    // Zero sends nothing; more than was taken stops at the rate.
    limiter.release(0).await.unwrap();
    limiter.release(100).await.unwrap();
    assert_eq!(limiter.available_permits().await.unwrap(), 10);
    assert!(limiter.try_acquire(10).await.unwrap());
    assert!(!limiter.try_acquire(1).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_and_update_rate_start_the_right_window_afresh_or_keep_it() {
    let redis = TestRedis::any();
    let (a, b) = (client(&redis.url()).await, client(&redis.url()).await);
    let name = unique_name("rate-set");
    let la = RateLimiter::new(&a, &name).unwrap();
    let lb = RateLimiter::new(&b, &name).unwrap();
    let hour = Duration::from_secs(3600);
    // An update needs a rate set, and writes nothing without one.
    assert!(
        !la.update_rate(RateArgs::new(RateType::Overall, 5, hour))
            .await
            .unwrap()
    );
    let exists: i64 = redis::Commands::exists(&mut redis.connection(), &name).unwrap();
    assert_eq!(exists, 0);

    // setRate(PER_CLIENT) starts the caller's own window afresh (Redisson: 9, 19, 9, 19).
    let mut left = Vec::new();
    for rate in [10, 20, 10, 20] {
        la.set_rate(RateType::PerClient, rate, hour).await.unwrap();
        assert!(la.try_acquire(1).await.unwrap());
        left.push(la.available_permits().await.unwrap());
    }
    assert_eq!(left, [9, 19, 9, 19]);
    // Another client's window is its own.
    assert_eq!(lb.available_permits().await.unwrap(), 20);

    // Keeping the state: the permits given stay given under the new rate.
    assert!(la.try_acquire(4).await.unwrap());
    assert!(
        la.update_rate(RateArgs::new(RateType::PerClient, 30, hour).keep_state(true))
            .await
            .unwrap()
    );
    assert_eq!(la.available_permits().await.unwrap(), 25);
    la.set_rate_with(RateArgs::new(RateType::PerClient, 6, hour).keep_state(true))
        .await
        .unwrap();
    assert_eq!(la.available_permits().await.unwrap(), 1);
    // Without it, afresh.
    assert!(
        la.update_rate(RateArgs::new(RateType::PerClient, 6, hour))
            .await
            .unwrap()
    );
    assert_eq!(la.available_permits().await.unwrap(), 6);
    // A changed type starts every window afresh, even when keeping the state.
    assert!(la.try_acquire(2).await.unwrap());
    la.set_rate(RateType::Overall, 3, hour).await.unwrap();
    assert!(la.try_acquire(3).await.unwrap());
    assert!(
        la.update_rate(RateArgs::new(RateType::PerClient, 6, hour).keep_state(true))
            .await
            .unwrap()
    );
    assert_eq!(la.available_permits().await.unwrap(), 6);
    let mut con = redis.connection();
    let overall: i64 = redis::Commands::exists(&mut con, format!("{{{name}}}:value")).unwrap();
    assert_eq!(overall, 0, "the overall window went with the type");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ferrisson_and_redisson_together_never_pass_the_rate() {
    let redis = TestRedis::any();
    let name = unique_name("rate-mixed");
    let (rate, interval) = (6u64, Duration::from_millis(400));
    let first = client(&redis.url()).await;
    assert!(
        RateLimiter::new(&first, &name)
            .unwrap()
            .try_set_rate(RateType::Overall, rate, interval)
            .await
            .unwrap()
    );
    // (server ms, permits) of every grant.
    let grants = Arc::new(Mutex::new(Vec::<(u64, u64)>::new()));
    let mut tasks = Vec::new();
    for side in 0..4u64 {
        let grants = grants.clone();
        let (url, name) = (redis.url(), name.clone());
        let ferrisson = client(&url).await;
        tasks.push(tokio::spawn(async move {
            let mut stamp = redis::Client::open(url.as_str())
                .unwrap()
                .get_multiplexed_async_connection()
                .await
                .unwrap();
            let mut redisson = Redisson::new(&url, &name).await;
            let limiter = RateLimiter::new(&ferrisson, &name).unwrap();
            let mut taken = 0;
            while taken < 6 {
                let n = 1 + (taken + side) % 2;
                let wait = if side % 2 == 0 {
                    limiter.acquire(u32::try_from(n).unwrap()).await.unwrap();
                    None
                } else {
                    redisson.try_acquire(u32::try_from(n).unwrap()).await
                };
                match wait {
                    None => {
                        let (s, us): (u64, u64) =
                            redis::cmd("TIME").query_async(&mut stamp).await.unwrap();
                        grants.lock().unwrap().push((s * 1000 + us / 1000, n));
                        taken += n;
                    }
                    Some(ms) => {
                        let ms = u64::try_from(ms.clamp(1, 400)).unwrap();
                        tokio::time::sleep(Duration::from_millis(ms)).await;
                    }
                }
            }
        }));
    }
    join_within(Duration::from_secs(60), "every grant", tasks).await;
    let mut grants = grants.lock().unwrap().clone();
    grants.sort_unstable();
    // In any window of the interval (less a little for the time between a grant and its
    // stamp), no more permits than the rate.
    let window = u64::try_from(interval.as_millis()).unwrap() - 20;
    for (i, (start, _)) in grants.iter().enumerate() {
        let inside: u64 = grants[i..]
            .iter()
            .take_while(|(t, _)| *t < start + window)
            .map(|(_, n)| n)
            .sum();
        assert!(
            inside <= rate,
            "{inside} permits within {window} ms from {start}: {grants:?}"
        );
    }
}
