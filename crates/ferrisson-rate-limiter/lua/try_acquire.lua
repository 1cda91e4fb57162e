-- ferrisson script
-- operation: rate_limiter/try_acquire
-- protocol: 1
-- Take permits of a rate limiter (Redisson RRateLimiter layout) if the window has them.
-- KEYS as rate_limiter/prelude: settings, overall value, this client's value, overall permits,
-- this client's permits
-- ARGV[1] permits wanted, >= 1
-- ARGV[2] 8 random bytes, unique to the try (the ZSET member's prefix)
-- returns {1, 0} when taken, {0, ms} when not: the permits come back in `ms`; {2, 0} when the
--         limiter has no rate set, {3, rate} when more permits are wanted than the rate allows;
--         WRONGTYPE error when the settings key holds a hash that is no rate limiter's
-- [ext] Every copy of a try counts once: a copy that finds the try's member in the window (a
-- resend after a lost reply, or a first send that reached Redis after its resend) answers
-- "taken" without taking again; one that finds it gone (back with the window) takes anew.
-- [ext] The time is the server's, and a permit given in the millisecond `now` is scored now +
-- 1, the end of that millisecond: the score `now` could lie up to a millisecond before the
-- moment the permit was given, and the permit would come back (`score <= now - interval`)
-- before a whole interval had passed since.
local s, foreign = limiter_settings(KEYS[1])
if foreign then
  return limiter_foreign()
end
if not s then
  return {2, 0}
end
local wanted = tonumber(ARGV[1])
if wanted > s.rate then
  return {3, s.rate}
end
local valueName, permitsName = limiter_names(s.kind)
local member = struct.pack('Bc0I', string.len(ARGV[2]), ARGV[2], wanted)
if redis.call('zscore', permitsName, member) then
  return {1, 0}
end
local now = limiter_now()
local current = limiter_left(s, valueName, permitsName, now)
if current < wanted then
  current = limiter_refilled(s, valueName, permitsName, current)
end
local result
if current < wanted then
  local first = redis.call('zrange', permitsName, 0, 0, 'withscores')
  result = {0, math.max(1, s.interval - (now - tonumber(first[2])))}
else
  redis.call('zadd', permitsName, now + 1, member)
  redis.call('decrby', valueName, wanted)
  result = {1, 0}
end
limiter_keep_alive(s, valueName, permitsName)
return result
