-- ferrisson script
-- operation: latch/state
-- protocol: 1
-- The count and the round, read together.
-- KEYS[1] the count
-- KEYS[2] round counter, suffixed(name, "round")
-- returns {count (0 when open), round}
local raw = redis.call('get', KEYS[1])
if raw and not tonumber(raw) then
  return redis.error_reply('WRONGTYPE the latch key does not hold a count')
end
return {math.max(tonumber(raw or '0'), 0), tonumber(redis.call('get', KEYS[2]) or '0')}
