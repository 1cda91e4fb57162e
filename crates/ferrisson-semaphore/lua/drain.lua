-- ferrisson script
-- operation: semaphore/drain
-- protocol: 1
-- Take every available permit at once (a count below zero stays as it is).
-- KEYS[1] permit count
-- returns the number of permits taken
local raw = redis.call('get', KEYS[1])
if not raw then
  return 0
end
local value = tonumber(raw)
if not value then
  return redis.error_reply('WRONGTYPE the semaphore key does not hold a permit count')
end
if value <= 0 then
  return 0
end
redis.call('set', KEYS[1], 0)
return value
