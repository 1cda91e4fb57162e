-- ferrisson script
-- operation: latch/state
-- protocol: 1
-- The count, the round and the last completed round, read together.
-- KEYS[1] the count
-- KEYS[2] round counter, suffixed(name, "round")
-- KEYS[3] the last completed round, suffixed(name, "completed") [ext]
-- returns {count (0 when open), round (0: none), the last round that ended (completed, or the
--         latch deleted), -1 when none is remembered, 1 if that round completed, 0 if the
--         latch was deleted (or none is remembered)}
local raw = redis.call('get', KEYS[1])
if raw and not tonumber(raw) then
  return redis.error_reply('WRONGTYPE the latch key does not hold a count')
end
local ended, completed = -1, 0
local marker = redis.call('get', KEYS[3])
if marker then
  local sep = string.find(marker, ':', 1, true)
  if sep then
    ended = tonumber(string.sub(marker, 1, sep - 1)) or 0
  else
    ended, completed = tonumber(marker) or 0, 1
  end
end
return {math.max(tonumber(raw or '0'), 0), tonumber(redis.call('get', KEYS[2]) or '0'), ended,
  completed}
