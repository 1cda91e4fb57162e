-- ferrisson script
-- operation: rwlock/read_acquire
-- protocol: 1
-- Take or re-enter a read hold of a read-write lock (Redisson RReadWriteLock layout): free,
-- in read mode, or in write mode held by the same owner (a writer may also read). Each read
-- hold gets its own lease key.
-- KEYS[1] lock hash: mode = "read" | "write", owner -> read holds, "<owner>:write" -> write holds
-- KEYS[2] the owner's hold-lease prefix, suffixed(name, owner) .. ":rwlock_timeout"; hold i
--         lives in KEYS[2] .. ":" .. i
-- KEYS[3] writer intent, prefixed("redisson_rwlock_writer", name) [ext]: while a writer waits,
--         readers that hold nothing yet wait too, so that readers cannot starve writers
-- ARGV[1] lease in milliseconds
-- ARGV[2] owner, "<client-id>:<n>"
-- ARGV[3] the owner's writer field, "<owner>:write"
-- ARGV[4] read hold count the client believes the owner has
-- ARGV[5] "1" when this call retries one whose reply was lost, else "0"
-- KEYS[4] the client's undone marks on the lock [ext] (core/marks_prelude): a copy of a resent
--         call that ran takes nothing
-- ARGV[6] the call's sequence number (its resends carry it too)
-- returns {1, read hold count} when the owner now holds one more read hold,
--         {0, ms to wait at most} when a writer (another owner) holds it or waits for it,
--         {0, 0} from a copy of a call that another copy ran before
local mode = redis.call('hget', KEYS[1], 'mode')
if mode ~= 'read' and mode ~= 'write' then
  -- Free, or a hash that is no read-write lock (a user's): never write into that.
  local foreign = foreign_lock(KEYS[1], true)
  if foreign then
    return foreign
  end
end
local late = late_copy(KEYS[4], ARGV[6], ARGV[5] == '1' or nil)
local held = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or '0')
if ARGV[5] == '1' and held == tonumber(ARGV[4]) + 1 then
  -- The lost attempt ran: the owner holds one more than it believes.
  redis.call('pexpire', KEYS[2] .. ':' .. held, ARGV[1])
  redis.call('pexpire', KEYS[1], math.max(redis.call('pttl', KEYS[1]), tonumber(ARGV[1])))
  return {1, held}
end
if late then
  return {0, 0}
end
if held == 0 and mode ~= 'write' and redis.call('exists', KEYS[3]) == 1 then
  -- A writer waits: queue behind it (until it is through, or its intent expires).
  local ttl = redis.call('pttl', KEYS[3])
  local lock_ttl = redis.call('pttl', KEYS[1])
  if lock_ttl > 0 then
    ttl = math.min(ttl, lock_ttl)
  end
  return {0, ttl}
end
if mode == false then
  redis.call('hset', KEYS[1], 'mode', 'read')
end
if mode == false or mode == 'read' or redis.call('hexists', KEYS[1], ARGV[3]) == 1 then
  held = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('set', KEYS[2] .. ':' .. held, 1, 'PX', ARGV[1])
  redis.call('pexpire', KEYS[1], math.max(redis.call('pttl', KEYS[1]), tonumber(ARGV[1])))
  return {1, held}
end
return {0, redis.call('pttl', KEYS[1])}
