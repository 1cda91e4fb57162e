-- ferrisson script
-- operation: rwlock/force_release
-- protocol: 1
-- Release a read-write lock whoever holds it (readers and writer), and wake every waiter.
-- KEYS[1] lock hash
-- KEYS[2] release channel, prefixed("redisson_rwlock", name)
-- ARGV[1] publish command ("publish")
-- returns 1 when a lock was released, 0 when it was not locked; WRONGTYPE error for another type
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' then
  return 0
end
if kind ~= 'hash' then
  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
redis.call('del', KEYS[1])
redis.call(ARGV[1], KEYS[2], '1')
return 1
