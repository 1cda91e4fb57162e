-- ferrisson script
-- operation: expirable_semaphore/release
-- protocol: 1
-- Release permits by id, all or nothing: every id must be held and unexpired. A retry with
-- the same request id gets the first result.
-- KEYS[1] permit count
-- KEYS[2] permits taken, suffixed(name, "timeout")
-- KEYS[3] channel, prefixed("redisson_sc", name)
-- KEYS[4] release latch, prefixed("redisson_unlock_latch", name) .. ":" .. request id
-- ARGV[1] publish command ("publish")
-- ARGV[2] how long the latch is kept, in milliseconds
-- ARGV[3 ..] permit ids, 32 hex chars each
-- returns the count after the release, or -i when the i-th id is not held (unknown, released
--         or expired; nothing was released)
local function raw(hex)
  return (string.gsub(hex, '..', function(pair) return string.char(tonumber(pair, 16)) end))
end
local latched = redis.call('get', KEYS[4])
if latched then
  return tonumber(latched)
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local result
for i = 3, #ARGV do
  local expiry = redis.call('zscore', KEYS[2], raw(ARGV[i]))
  if not expiry or tonumber(expiry) <= now then
    result = -(i - 2)
    break
  end
end
if not result then
  for i = 3, #ARGV do
    redis.call('zrem', KEYS[2], raw(ARGV[i]))
  end
  result = redis.call('incrby', KEYS[1], #ARGV - 2)
  redis.call(ARGV[1], KEYS[3], result)
end
redis.call('set', KEYS[4], result, 'PX', ARGV[2])
return result
