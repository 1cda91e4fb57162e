-- ferrisson script
-- operation: fair_lock/force_release
-- protocol: 1
-- Release a fair lock whoever holds it, and wake the head waiter (and the lock's watchers, on
-- the channel prefix itself [ext], as fair_lock/release does).
-- KEYS[1] lock hash
-- KEYS[2] waiter queue, prefixed("redisson_lock_queue", name)
-- KEYS[3] release channel prefix, prefixed("redisson_lock__channel", name)
-- ARGV[1] publish command ("publish")
-- returns 1 when a lock was released, 0 when it was not locked; WRONGTYPE error when the key holds no lock of this kind (core/lock_prelude)
local foreign = foreign_lock(KEYS[1], false)
if foreign then
  return foreign
end
if redis.call('exists', KEYS[1]) == 0 then
  return 0
end
redis.call('del', KEYS[1])
local head = redis.call('lindex', KEYS[2], 0)
if head then
  redis.call(ARGV[1], KEYS[3] .. ':' .. head, '0')
end
redis.call(ARGV[1], KEYS[3], '0')
return 1
