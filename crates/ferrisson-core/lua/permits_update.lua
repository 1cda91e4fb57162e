-- ferrisson script
-- operation: core/permits_update
-- protocol: 1
-- Set or change the permit count of a semaphore (plain or permit-expirable), and publish the
-- new count.
-- KEYS[1] permit count
-- KEYS[2] channel, prefixed("redisson_sc", name)
-- ARGV[1] "try_set" (only when no count is set), "set", or "add" (may be negative)
-- ARGV[2] the count, or the amount to add
-- ARGV[3] publish command ("publish")
-- returns {1, count} when the count changed (or was set), {0, count} when try_set found one
local raw = redis.call('get', KEYS[1])
if raw and not tonumber(raw) then
  return redis.error_reply('WRONGTYPE the semaphore key does not hold a permit count')
end
local value
if ARGV[1] == 'try_set' then
  if raw then
    return {0, tonumber(raw)}
  end
  redis.call('set', KEYS[1], ARGV[2])
  value = tonumber(ARGV[2])
elseif ARGV[1] == 'set' then
  redis.call('set', KEYS[1], ARGV[2])
  value = tonumber(ARGV[2])
else
  value = redis.call('incrby', KEYS[1], ARGV[2])
end
redis.call(ARGV[3], KEYS[2], value)
return {1, value}
