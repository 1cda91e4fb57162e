-- ferrisson script
-- operation: rate_limiter/try_acquire
-- protocol: 1
-- Take permits of a rate limiter (Redisson RRateLimiter layout) if the window has them.
-- KEYS[1] the settings hash: rate, interval (ms), type ("0" overall, "1" per client)
-- KEYS[2] permits left, suffixed(name, "value") (overall)
-- KEYS[3] permits left of this client, suffixed(name, "value") .. ":" .. client id
-- KEYS[4] permits given in the window, suffixed(name, "permits"): a ZSET of
--         struct.pack('Bc0I', #random, random, permits) scored by the time they were given (ms)
-- KEYS[5] the same for this client, suffixed(name, "permits") .. ":" .. client id
-- ARGV[1] permits wanted, >= 1
-- ARGV[2] 8 random bytes, unique to the call (the ZSET member's prefix)
-- ARGV[3] "1" when this call retries one whose reply was lost, else "0" [ext]: a retry that finds
--         its own member in the window took its permits in the lost run, and answers so without
--         taking them again (a retry after the member left the window takes permits anew)
-- returns {1, 0} when taken, {0, ms} when not: the permits come back in `ms`; {2, 0} when the
--         limiter has no rate set, {3, rate} when more permits are wanted than the rate allows;
--         WRONGTYPE error when the settings key holds a hash that is no rate limiter's
-- [ext] the time is the server's (Redisson passes the client's clock). A permit given in the
-- millisecond `now` is scored now + 1, the end of that millisecond: the server's clock reads
-- whole milliseconds, so the score `now` could lie up to a millisecond before the moment the
-- permit was given, and the permit would come back (`score <= now - interval`) before a whole
-- interval had passed since.
-- The settings' fields (Redisson's; keepAliveTime in newer Redisson), as SETTINGS in
-- limiter.rs: a hash with any other field, or a field that is no number, is someone else's.
local known = {rate = true, interval = true, type = true, keepAliveTime = true}
local settings = redis.call('hgetall', KEYS[1])
local fields = {}
for i = 1, #settings, 2 do
  local field = settings[i]
  if not known[field] or not tonumber(settings[i + 1]) then
    return redis.error_reply('WRONGTYPE the key holds no rate limiter of this synchronizer')
  end
  fields[field] = settings[i + 1]
end
local rate, interval, kind = fields['rate'], fields['interval'], fields['type']
if rate == nil or interval == nil or kind == nil then
  return {2, 0}
end
rate = tonumber(rate)
interval = tonumber(interval)
local wanted = tonumber(ARGV[1])
if wanted > rate then
  return {3, rate}
end
local valueName = KEYS[2]
local permitsName = KEYS[4]
if kind == '1' then
  valueName = KEYS[3]
  permitsName = KEYS[5]
end
local member = struct.pack('Bc0I', string.len(ARGV[2]), ARGV[2], wanted)
if ARGV[3] == '1' and redis.call('zscore', permitsName, member) then
  -- The lost run took these permits: they count once.
  return {1, 0}
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local current = redis.call('get', valueName)
if current == false then
  redis.call('set', valueName, rate)
  current = rate
else
  current = tonumber(current)
  local expired = redis.call('zrangebyscore', permitsName, 0, now - interval)
  local released = 0
  for _, v in ipairs(expired) do
    local _, permits = struct.unpack('Bc0I', v)
    released = released + permits
  end
  if released > 0 then
    redis.call('zremrangebyscore', permitsName, 0, now - interval)
    if current + released > rate then
      current = rate - redis.call('zcard', permitsName)
    else
      current = current + released
    end
    redis.call('set', valueName, current)
  end
end
local result
if current < wanted then
  local first = redis.call('zrange', permitsName, 0, 0, 'withscores')
  local wait = 1
  if first[2] ~= nil then
    wait = math.max(1, interval - (now - tonumber(first[2])))
  end
  result = {0, wait}
else
  redis.call('zadd', permitsName, now + 1, member)
  redis.call('decrby', valueName, wanted)
  result = {1, 0}
end
local ttl = redis.call('pttl', KEYS[1])
if ttl > 0 then
  redis.call('pexpire', valueName, ttl)
  redis.call('pexpire', permitsName, ttl)
end
return result
