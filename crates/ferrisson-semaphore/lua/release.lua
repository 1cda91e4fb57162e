-- ferrisson script
-- operation: semaphore/release
-- protocol: 1
-- Give n permits back and publish the new count; a retry with the same request id gives them
-- back once.
-- KEYS[1] permit count
-- KEYS[2] channel, prefixed("redisson_sc", name)
-- KEYS[3] release latch, prefixed("redisson_unlock_latch", name) .. ":" .. request id
-- KEYS[4] the count's epoch [ext] (see semaphore/acquire)
-- ARGV[1] permits, n >= 1
-- ARGV[2] publish command ("publish")
-- ARGV[3] how long the latch is kept, in milliseconds
-- ARGV[4] the semaphore's configured limit [ext], or "" for none: the count never grows above
--         it (after a count restored to the limit, holders from before the loss give back
--         permits the restore already counted)
-- ARGV[5] the epoch the permits were taken in [ext] ("0": before any), or "" for a release of
--         permits of unknown origin (Redisson's release, Semaphore::release): permits of an older
--         epoch were given back by the restore already, so releasing them changes nothing
-- ARGV[6] "1" to release only when a count is set (Redisson's releaseIfExists), else "0"
-- returns the count after the release; nil when ARGV[6] is "1" and no count is set (nothing
--         changed)
local latched = redis.call('get', KEYS[3])
if latched then
  return tonumber(latched)
end
local raw = redis.call('get', KEYS[1])
if raw and not tonumber(raw) then
  return redis.error_reply('WRONGTYPE the semaphore key does not hold a permit count')
end
if not raw and ARGV[6] == '1' then
  return nil
end
if ARGV[5] ~= '' and tonumber(redis.call('get', KEYS[4]) or '0') ~= tonumber(ARGV[5]) then
  local count = tonumber(raw or '0') or 0
  redis.call('set', KEYS[3], count, 'PX', ARGV[3])
  return count
end
local value = redis.call('incrby', KEYS[1], ARGV[1])
if ARGV[4] ~= '' and value > tonumber(ARGV[4]) then
  value = tonumber(ARGV[4])
  redis.call('set', KEYS[1], ARGV[4])
end
redis.call(ARGV[2], KEYS[2], value)
redis.call('set', KEYS[3], value, 'PX', ARGV[3])
return value
