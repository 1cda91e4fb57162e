-- ferrisson script
-- operation: rate_limiter/set_rate
-- protocol: 1
-- Set a rate limiter's rate (Redisson RRateLimiter layout): only if none is set (try), or in
-- any case, starting afresh (the permits given so far are forgotten).
-- KEYS[1] the settings hash
-- KEYS[2] permits left, suffixed(name, "value")
-- KEYS[3] permits given, suffixed(name, "permits")
-- ARGV[1] rate, ARGV[2] interval in ms, ARGV[3] type ("0" overall, "1" per client)
-- ARGV[4] "1" to set only if no rate is set, "0" to set in any case
-- ARGV[5] the settings' shape for foreign_object: "numbers:" and the settings' fields
-- returns 1 when set, 0 when a rate was set already (try); WRONGTYPE error when the settings
--         key holds something that is no rate limiter's (nothing changed)
local foreign = foreign_object(KEYS[1], ARGV[5])
if foreign then
  return foreign
end
if ARGV[4] == '1' then
  if redis.call('hsetnx', KEYS[1], 'rate', ARGV[1]) == 0 then
    return 0
  end
  redis.call('hsetnx', KEYS[1], 'interval', ARGV[2])
  redis.call('hsetnx', KEYS[1], 'type', ARGV[3])
  return 1
end
redis.call('hset', KEYS[1], 'rate', ARGV[1], 'interval', ARGV[2], 'type', ARGV[3])
redis.call('del', KEYS[2], KEYS[3])
-- Per-client keys are named after client ids this script does not know: they start afresh
-- when their permits expire (Redisson's setRate has the same limit).
return 1
