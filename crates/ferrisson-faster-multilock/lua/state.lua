-- ferrisson script
-- operation: faster_multilock/state
-- protocol: 1
-- Read, without changing anything, how a set of values of a group is held.
-- KEYS[1] the group hash
-- ARGV[1] the hold, "<owner> <field> <field> ..." (faster_multilock/prelude); the owner "-"
--   when only whether the values are held is asked
-- returns {holds, held, pttl}: holds = the owner's holds of the values (the least of their
--   lock counts; 0 when it does not hold them all), held = 1 when anyone holds any of them,
--   pttl = the hash's PTTL; WRONGTYPE error when the key holds no group
local foreign = fml_foreign(KEYS[1])
if foreign then
  return foreign
end
local key = KEYS[1]
local owner, fields = fml_hold(ARGV[1])
local _, _, live, counts = fml_read(key, fields, owner, fml_now())
local holds, held = nil, 0
for i = 1, #fields do
  if live[i] then
    held = 1
  end
  holds = math.min(holds or counts[i], counts[i])
end
return {holds or 0, held, redis.call('pttl', key)}
