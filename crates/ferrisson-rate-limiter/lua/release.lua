-- ferrisson script
-- operation: rate_limiter/release
-- protocol: 1
-- Give permits back to a rate limiter's window (Redisson's RRateLimiter.release): the permits
-- given longest ago leave the window (the last one named shrinks), the value grows by as many,
-- up to the rate, and the keep-alive is refreshed as an acquire does.
-- KEYS as rate_limiter/prelude: settings, overall value, this client's value, overall permits,
-- this client's permits. The client's record [ext] (core/record_prelude) is derived from the
-- settings key
-- ARGV[1] permits, n >= 1
-- ARGV[2] the client id, 32 hex digits (its record)
-- ARGV[3] the release's slot in the record, ARGV[4] its sequence number
-- ARGV[5] flags: "r" a resend, "e<ms>" set the record's TTL ("": none)
-- returns 1 when released, 2 when the limiter has no rate set (nothing changed); WRONGTYPE
--         error when the settings key holds a hash that is no rate limiter's
-- [ext] Every copy of a release reads its slot in the client's record and gives the permits
-- back once (Redisson's would give them back again on a retry).
-- [ext] The permits already back with the window are counted back first, so that the release
-- takes live permits out of it (Redisson's may take out permits that were back already, and
-- give back fewer).
local record = record_keys(KEYS[1], ARGV[2])
local state, result = record_state(record, ARGV[3], ARGV[4])
if state == 'ran' then
  return tonumber(result)
end
local s, foreign = limiter_settings(KEYS[1])
if foreign then
  return limiter_foreign()
end
if not s then
  record_mark(record, ARGV[3], ARGV[4], 2, ARGV[5])
  return 2
end
local valueName, permitsName = limiter_names(s.kind)
local n = tonumber(ARGV[1])
local current = limiter_left(s, valueName, permitsName, limiter_now())
local left = n
local given = redis.call('zrange', permitsName, 0, -1, 'withscores')
for i = 1, #given - 1, 2 do
  if left <= 0 then
    break
  end
  local v = given[i]
  local random, permits = struct.unpack('Bc0I', v)
  redis.call('zrem', permitsName, v)
  if permits > left then
    redis.call('zadd', permitsName, given[i + 1],
      struct.pack('Bc0I', string.len(random), random, permits - left))
    left = 0
  else
    left = left - permits
  end
end
redis.call('set', valueName, math.min(current + n, s.rate))
limiter_keep_alive(s, valueName, permitsName)
record_mark(record, ARGV[3], ARGV[4], 1, ARGV[5])
return 1
