-- ferrisson script
-- operation: expirable_semaphore/renew
-- protocol: 1
-- Extend permits' leases (the watchdog, by batches, and lease updates); an expired permit is
-- never revived.
-- KEYS[i] permits taken, suffixed(name, "timeout"), of permit i
-- ARGV[1] lease in milliseconds, from now
-- ARGV[i + 1] id of permit i, 32 hex chars
-- returns an array: 1 where the lease was extended, 0 where the permit is not held
local function raw(hex)
  return (string.gsub(hex, '..', function(pair) return string.char(tonumber(pair, 16)) end))
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local renewed = {}
for i = 1, #KEYS do
  local ok = 0
  if redis.call('type', KEYS[i]).ok == 'zset' then
    local id = raw(ARGV[i + 1])
    local expiry = redis.call('zscore', KEYS[i], id)
    if expiry and tonumber(expiry) > now then
      -- + 1: the end of the server's current millisecond (see expirable_semaphore/acquire).
      redis.call('zadd', KEYS[i], 'XX', now + tonumber(ARGV[1]) + 1, id)
      ok = 1
    end
  end
  renewed[i] = ok
end
return renewed
