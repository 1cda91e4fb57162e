-- ferrisson script
-- operation: core/force_release_hash
-- protocol: 1
-- Release a lock kept in a hash (reentrant lock, read-write lock) whoever holds it, and wake
-- its waiters.
-- KEYS[1] lock hash
-- KEYS[2] release channel
-- ARGV[1] publish command ("publish")
-- ARGV[2] message: "0" (reentrant lock: wake one) or "1" (read-write lock: wake all)
-- ARGV[3] (read-write lock) "read" or "write" to release only a lock held in that mode (one
--         side's force unlock, Redisson's RReadLock / RWriteLock forceUnlock), "" for any
-- returns 1 when a lock was released, 0 when it was not locked; WRONGTYPE error when the key holds no lock of this kind (core/lock_prelude)
local foreign = foreign_lock(KEYS[1], ARGV[2] == '1')
if foreign then
  return foreign
end
if redis.call('exists', KEYS[1]) == 0 then
  return 0
end
if ARGV[3] and ARGV[3] ~= '' and redis.call('hget', KEYS[1], 'mode') ~= ARGV[3] then
  return 0
end
redis.call('del', KEYS[1])
redis.call(ARGV[1], KEYS[2], ARGV[2])
return 1
