-- ferrisson script
-- operation: faster_multilock/renew
-- protocol: 1
-- Watchdog batch renewal of faster multi-lock holds (Redisson's FastMultilockTask): extend
-- every value of a hold when its owner still holds them all.
-- KEYS[i] the group hash of hold i
-- ARGV[1] lease in milliseconds
-- ARGV[i + 1] hold i, "<owner> <field> <field> ..." (faster_multilock/prelude)
-- returns an array: 1 where the hold's values were extended, 0 where the owner no longer holds
--   one of them (nothing of that hold is extended)
local lease = tonumber(ARGV[1])
local now = fml_now()
local renewed = {}
for i = 1, #KEYS do
  local key = KEYS[i]
  local owner, fields = fml_hold(ARGV[i + 1])
  local ok = redis.call('type', key).ok == 'hash' and #fields > 0
  local holders, ends, live = {}, {}, {}
  if ok then
    holders, ends, live = fml_read(key, fields, owner, now)
    for j = 1, #fields do
      ok = ok and live[j] and holders[j] == owner
    end
  end
  renewed[i] = 0
  if ok then
    fml_extend(key, fields, owner, ends, now, lease)
    renewed[i] = 1
  end
end
return renewed
