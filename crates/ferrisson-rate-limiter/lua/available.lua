-- ferrisson script
-- operation: rate_limiter/available
-- protocol: 1
-- The permits a rate limiter's window has left right now (Redisson's availablePermits): those
-- given an interval ago or more are counted back first, as an acquire does.
-- KEYS as rate_limiter/prelude: settings, overall value, this client's value, overall permits,
-- this client's permits
-- returns {1, permits left}; {2, 0} when the limiter has no rate set; WRONGTYPE error when the
--         settings key holds a hash that is no rate limiter's
local s, foreign = limiter_settings(KEYS[1])
if foreign then
  return limiter_foreign()
end
if not s then
  return {2, 0}
end
local valueName, permitsName = limiter_names(s.kind)
local current = limiter_left(s, valueName, permitsName, limiter_now())
return {1, limiter_refilled(s, valueName, permitsName, current)}
