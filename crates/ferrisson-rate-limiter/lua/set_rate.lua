-- ferrisson script
-- operation: rate_limiter/set_rate
-- protocol: 1
-- Set a rate limiter's rate (Redisson RRateLimiter layout): only if none is set (try), in any
-- case (set), or only if one is set (update), as Redisson's trySetRate, setRate and updateRate.
-- KEYS as rate_limiter/prelude: settings, overall value, this client's value, overall permits,
-- this client's permits
-- ARGV[1] rate, ARGV[2] interval in ms, ARGV[3] type ("0" overall, "1" per client)
-- ARGV[4] keep-alive in ms ("0": none): every acquire and release makes the limiter's keys live
--         that long again, so that a limiter nobody uses goes away
-- ARGV[5] "try", "set" or "update"
-- ARGV[6] "1" to keep the window's state (set, update): the value is recounted as the rate
--         less the permits given in the window; "0" to start afresh
-- returns 1 when set, 0 when not (try: a rate was set already; update: none was);
--         WRONGTYPE error when the settings key holds something that is no rate limiter's
--         (nothing changed)
-- A changed type starts afresh, overall and this client's window both (Redisson's updateRate).
-- Other clients' per-client windows are named after ids this script does not know: they
-- start afresh when their permits expire (Redisson's setRate has the same limit).
local old, foreign = limiter_settings(KEYS[1])
if foreign then
  return limiter_foreign()
end
local mode = ARGV[5]
if (mode == 'try' and old) or (mode == 'update' and not old) then
  return 0
end
local s = {
  rate = tonumber(ARGV[1]),
  interval = tonumber(ARGV[2]),
  kind = ARGV[3],
  keep = tonumber(ARGV[4]),
}
redis.call('hset', KEYS[1], 'rate', ARGV[1], 'interval', ARGV[2], 'type', ARGV[3],
  'keepAliveTime', ARGV[4])
if s.keep > 0 then
  redis.call('pexpire', KEYS[1], s.keep)
elseif old and old.keep > 0 then
  -- [ext] No keep-alive any more: the settings stay (Redisson leaves the old keep-alive's TTL
  -- to run out, and the limiter to vanish with it).
  redis.call('persist', KEYS[1])
end
if mode == 'try' then
  return 1
end
local valueName, permitsName = limiter_names(s.kind)
if old and old.kind ~= s.kind then
  redis.call('del', KEYS[2], KEYS[3], KEYS[4], KEYS[5])
  return 1
end
if ARGV[6] ~= '1' then
  redis.call('del', valueName, permitsName)
  return 1
end
redis.call('zremrangebyscore', permitsName, 0, limiter_now() - s.interval)
redis.call('set', valueName, math.max(s.rate - limiter_used(permitsName), 0))
limiter_keep_alive(s, valueName, permitsName)
return 1
