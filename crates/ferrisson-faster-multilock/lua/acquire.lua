-- ferrisson script
-- operation: faster_multilock/acquire
-- protocol: 1
-- Take every value of a hold at once, or none (Redisson's RFasterMultiLock tryLockInner): a
-- value held by another owner whose lease runs makes the call wait; the owner's own values are
-- re-entered (their lock_count grows). A value whose lease ran out is taken over, and its last
-- holder's fields are deleted [ext] (Redisson leaves them until the hash expires).
-- KEYS[1] the group hash
-- ARGV[1] lease in milliseconds
-- ARGV[2] the hold, "<owner> <field> <field> ..." (faster_multilock/prelude)
-- ARGV[3] (a retry only) the holds the client believes the owner has of these values
-- returns the owner's holds of the values (the least of their lock counts) when taken,
--   {0, ms} when another owner holds a value (ms: the longest lease left among such values);
--   WRONGTYPE error when the key holds no group
local foreign = fml_foreign(KEYS[1])
if foreign then
  return foreign
end
local key, lease = KEYS[1], tonumber(ARGV[1])
local owner, fields = fml_hold(ARGV[2])
local now = fml_now()
local busy, held, last = -1, nil, {}
for i = 1, #fields do
  local holder, expires = fml_holder(key, fields[i], now)
  if holder and holder ~= owner then
    busy = math.max(busy, expires - now)
  elseif holder then
    local count = tonumber(redis.call('hget', key, fields[i] .. ':' .. owner .. ':lock_count')) or 0
    held = math.min(held or count, count)
  else
    held = 0
    last[i] = expires
  end
end
if busy >= 0 then
  return {0, busy}
end
if ARGV[3] and held == tonumber(ARGV[3]) + 1 then
  -- The lost attempt ran: these holds are the ones it took.
  for i = 1, #fields do
    fml_extend(key, fields[i], owner, now + lease)
  end
  fml_expire(key, lease)
  return held
end
local least = nil
for i = 1, #fields do
  local field = fields[i]
  if last[i] then
    -- Free, or its last holder's lease ran out: nothing of that hold is left.
    fml_clear(key, field, last[i])
  end
  redis.call('hset', key, field, owner)
  fml_extend(key, field, owner, now + lease)
  local count = redis.call('hincrby', key, field .. ':' .. owner .. ':lock_count', 1)
  least = math.min(least or count, count)
end
fml_expire(key, lease)
return least
