-- ferrisson script
-- operation: core/force_release_hash
-- protocol: 1
-- Release a lock kept in a hash (reentrant lock, read-write lock) whoever holds it, and wake
-- its waiters.
-- KEYS[1] lock hash
-- KEYS[2] release channel
-- ARGV[1] publish command ("publish")
-- ARGV[2] message: "0" (reentrant lock: wake one) or "1" (read-write lock: wake all)
-- returns 1 when a lock was released, 0 when it was not locked; WRONGTYPE error for another type
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' then
  return 0
end
if kind ~= 'hash' then
  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
redis.call('del', KEYS[1])
redis.call(ARGV[1], KEYS[2], ARGV[2])
return 1
