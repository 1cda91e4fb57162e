-- ferrisson script
-- operation: core/permits_update
-- protocol: 1
-- Set or change the permit count of a semaphore (plain or permit-expirable), and publish the
-- new count.
-- KEYS[1] permit count
-- KEYS[2] channel, prefixed("redisson_sc", name)
-- KEYS[3] (set_total only) the permit-expirable semaphore's permits taken, suffixed(name,
--         "timeout")
-- ARGV[1] "try_set" (only when no count is set), "set", "set_total" (the permit-expirable
--         semaphore's total: free = total - taken, below zero when more are taken; Redisson's
--         RPermitExpirableSemaphore setPermits; expired permits are dropped first), or "add"
--         (may be negative)
-- ARGV[2] the count, the total, or the amount to add
-- ARGV[3] publish command ("publish")
-- ARGV[4] (try_set only) a time to live for the count in milliseconds, or "0" for none
--         (Redisson's RSemaphore trySetPermits(permits, timeToLive))
-- returns {1, count} when the count changed (or was set), {0, count} when try_set found one,
--         {2, count} when an add would take the count beyond +-(2^53 - 1), the integers Lua
--         (and so every script here) counts exactly [ext]: nothing changed
local raw = redis.call('get', KEYS[1])
if raw and not tonumber(raw) then
  return redis.error_reply('WRONGTYPE the semaphore key does not hold a permit count')
end
local value
if ARGV[1] == 'try_set' then
  if raw then
    return {0, tonumber(raw)}
  end
  if ARGV[4] and ARGV[4] ~= '0' then
    redis.call('set', KEYS[1], ARGV[2], 'px', ARGV[4])
  else
    redis.call('set', KEYS[1], ARGV[2])
  end
  value = tonumber(ARGV[2])
elseif ARGV[1] == 'set_total' then
  local t = redis.call('time')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('zremrangebyscore', KEYS[3], '-inf', now)
  value = tonumber(ARGV[2]) - redis.call('zcard', KEYS[3])
  redis.call('set', KEYS[1], value)
elseif ARGV[1] == 'set' then
  redis.call('set', KEYS[1], ARGV[2])
  value = tonumber(ARGV[2])
else
  local current = tonumber(raw or '0')
  local after = current + tonumber(ARGV[2])
  if after > 9007199254740991 or after < -9007199254740991 then
    return {2, current}
  end
  value = redis.call('incrby', KEYS[1], ARGV[2])
end
redis.call(ARGV[3], KEYS[2], value)
return {1, value}
