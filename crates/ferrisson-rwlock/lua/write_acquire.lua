-- ferrisson script
-- operation: rwlock/write_acquire
-- protocol: 1
-- Take or re-enter the write hold of a read-write lock, optionally with a fencing token.
-- Read holds whose every lease key has expired (their client died) are dropped first, so a
-- crashed reader never keeps writers out [ext]. A read -> write upgrade is refused at once.
-- KEYS[1] lock hash
-- KEYS[2] fencing counter, prefixed("redisson_lock_token", name), issued by next_token (core/lock_prelude); touched only when ARGV[6] = "1"
-- KEYS[3] writer intent, prefixed("redisson_rwlock_writer", name) [ext]: set while the caller
--         waits (new readers then wait too), cleared when it gets the lock
-- ARGV[1] lease in milliseconds
-- ARGV[2] the owner's writer field, "<owner>:write"
-- ARGV[3] owner, "<client-id>:<n>" (its read holds make the call an upgrade)
-- ARGV[4] write hold count the client believes the owner has
-- ARGV[5] "1" when this call retries one whose reply was lost, else "0"
-- ARGV[6] "1" for a fenced lock, else "0"
-- ARGV[7] the hold-lease key base, suffixed(name, "") without the trailing ":": the lease of
--         read hold i of owner o is ARGV[7] .. ":" .. o .. ":rwlock_timeout:" .. i (derived
--         here, as Redisson does, to find dead readers; same hash slot as KEYS[1])
-- ARGV[8] how long the writer intent lasts unless renewed, in milliseconds; "0" to leave no
--         intent (a try without waiting)
-- KEYS[4] the client's undone marks on the lock [ext] (core/marks_prelude): a copy of a resent
--         call that ran takes nothing
-- ARGV[9] the call's sequence number (its resends carry it too)
-- returns {1, write hold count, token} when the owner now holds the write lock (token 0 when
--         not fenced), {0, PTTL of the lock} when others hold it, {-1, 0} for an upgrade,
--         {0, 0} from a copy of a call that another copy ran before
local function token_of(increment)
  if ARGV[6] ~= '1' then
    return 0
  end
  if increment then
    return next_token(KEYS[2])
  end
  return tonumber(redis.call('get', KEYS[2]) or '0')
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode ~= 'read' and mode ~= 'write' then
  -- Free, or a hash that is no read-write lock (a user's): never write into that.
  local foreign = foreign_lock(KEYS[1], true)
  if foreign then
    return foreign
  end
end
local late = late_copy(KEYS[4], ARGV[9], ARGV[5] == '1' or nil)
local held = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or '0')
if ARGV[5] == '1' and held == tonumber(ARGV[4]) + 1 then
  redis.call('pexpire', KEYS[1], math.max(redis.call('pttl', KEYS[1]), tonumber(ARGV[1])))
  return {1, held, token_of(false)}
end
if late then
  return {0, 0}
end
if mode == 'write' and held > 0 then
  held = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], math.max(redis.call('pttl', KEYS[1]), tonumber(ARGV[1])))
  return {1, held, token_of(true)}
end
if mode == 'read' then
  -- Drop readers none of whose hold leases is left.
  local fields = redis.call('hkeys', KEYS[1])
  for _, field in ipairs(fields) do
    if field ~= 'mode' and string.sub(field, -6) ~= ':write' then
      local count = tonumber(redis.call('hget', KEYS[1], field)) or 0
      local alive = false
      for i = 1, count do
        if redis.call('exists', ARGV[7] .. ':' .. field .. ':rwlock_timeout:' .. i) == 1 then
          alive = true
          break
        end
      end
      if not alive then
        redis.call('hdel', KEYS[1], field)
      end
    end
  end
  if redis.call('hlen', KEYS[1]) <= 1 then
    redis.call('del', KEYS[1])
    mode = false
  elseif redis.call('hexists', KEYS[1], ARGV[3]) == 1 then
    return {-1, 0}
  end
end
if mode == false then
  redis.call('hset', KEYS[1], 'mode', 'write', ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  if redis.call('get', KEYS[3]) == ARGV[2] then
    redis.call('del', KEYS[3])
  end
  return {1, 1, token_of(true)}
end
if ARGV[8] ~= '0' then
  redis.call('set', KEYS[3], ARGV[2], 'PX', ARGV[8])
end
return {0, redis.call('pttl', KEYS[1])}
