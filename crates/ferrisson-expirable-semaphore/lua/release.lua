-- ferrisson script
-- operation: expirable_semaphore/release
-- protocol: 1
-- Release permits by id, all or nothing (every id must be held and unexpired), or each one
-- held (Redisson's tryRelease(ids)). A retry with the same request id gets the first result.
-- KEYS[1] permit count
-- KEYS[2] permits taken, suffixed(name, "timeout")
-- KEYS[3] channel, prefixed("redisson_sc", name)
-- KEYS[4] release latch, prefixed("redisson_unlock_latch", name) .. ":" .. request id
-- ARGV[1] publish command ("publish")
-- ARGV[2] how long the latch is kept, in milliseconds
-- ARGV[3] "all" (all or nothing) or "held" (each id held)
-- ARGV[4 ..] permit ids, 16 raw bytes each
-- returns, for "all", the count after the release, or -i when the i-th id is not held
--         (unknown, released or expired; nothing was released); for "held", how many were
--         released
local latched = redis.call('get', KEYS[4])
if latched then
  return tonumber(latched)
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local result
if ARGV[3] == 'held' then
  result = 0
  for i = 4, #ARGV do
    local id = ARGV[i]
    local expiry = redis.call('zscore', KEYS[2], id)
    if expiry and tonumber(expiry) > now then
      result = result + redis.call('zrem', KEYS[2], id)
    end
  end
  if result > 0 then
    redis.call(ARGV[1], KEYS[3], redis.call('incrby', KEYS[1], result))
  end
else
  for i = 4, #ARGV do
    local expiry = redis.call('zscore', KEYS[2], ARGV[i])
    if not expiry or tonumber(expiry) <= now then
      result = -(i - 3)
      break
    end
  end
  if not result then
    for i = 4, #ARGV do
      redis.call('zrem', KEYS[2], ARGV[i])
    end
    result = redis.call('incrby', KEYS[1], #ARGV - 3)
    redis.call(ARGV[1], KEYS[3], result)
  end
end
redis.call('set', KEYS[4], result, 'PX', ARGV[2])
return result
