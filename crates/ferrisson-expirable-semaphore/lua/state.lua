-- ferrisson script
-- operation: expirable_semaphore/state
-- protocol: 1
-- Return expired permits to the count, then report the count, the permits taken and one
-- permit's remaining lease.
-- KEYS[1] permit count
-- KEYS[2] permits taken, suffixed(name, "timeout")
-- KEYS[3] channel, prefixed("redisson_sc", name)
-- ARGV[1] publish command ("publish")
-- ARGV[2] a permit id (32 hex chars), or "" for none
-- returns {available, taken, remaining lease of the permit in ms (-1: no lease, -2: not held)}
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local raw_count = redis.call('get', KEYS[1])
if raw_count and not tonumber(raw_count) then
  return redis.error_reply('WRONGTYPE the semaphore key does not hold a permit count')
end
local value = tonumber(raw_count or '0')
local expired = redis.call('zremrangebyscore', KEYS[2], '-inf', now)
if expired > 0 then
  value = redis.call('incrby', KEYS[1], expired)
  if value > 0 then
    redis.call(ARGV[1], KEYS[3], value)
  end
end
local left = -2
if ARGV[2] ~= '' then
  local id = string.gsub(ARGV[2], '..', function(pair) return string.char(tonumber(pair, 16)) end)
  local expiry = redis.call('zscore', KEYS[2], id)
  if expiry then
    if tonumber(expiry) >= 922337203685477 then
      left = -1
    else
      -- Less the millisecond every expiry carries beyond its lease (expirable_semaphore/
      -- acquire): the lease left as its holder counts it.
      left = math.max(tonumber(expiry) - 1 - now, 0)
    end
  end
end
return {value, redis.call('zcard', KEYS[2]), left}
