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
local values = fml_read(key, fields, owner, now)
local busy, least = -1, nil
for i = 1, #fields do
  local v = values[i]
  if v[3] and v[1] ~= owner then
    busy = math.max(busy, v[2] - now)
  end
  least = math.min(least or v[4], v[4])
end
if busy >= 0 then
  return {0, busy}
end
local ends = now + lease
local flat, stale = {}, {}
if ARGV[3] and least == tonumber(ARGV[3]) + 1 then
  -- The lost attempt ran: these holds are the ones it took.
  for i = 1, #fields do
    if values[i][2] < ends then
      flat[#flat + 1] = fml_names(fields[i], owner)
      flat[#flat + 1] = string.format('%d', ends)
    end
  end
  fml_set(key, flat)
  fml_expire(key, lease)
  return least
end
least = nil
for i = 1, #fields do
  local field, v = fields[i], values[i]
  local holder, at, live, count = v[1], v[2], v[3], v[4]
  if holder and holder ~= owner then
    -- Its last holder's lease ran out: nothing of that hold is left.
    local stale_end, stale_count = fml_names(field, holder)
    stale[#stale + 1] = stale_end
    stale[#stale + 1] = stale_count
  end
  local end_name, count_name = fml_names(field, owner)
  if not (live and at > ends) then
    at = ends
  end
  flat[#flat + 1] = field
  flat[#flat + 1] = owner
  flat[#flat + 1] = end_name
  flat[#flat + 1] = string.format('%d', at)
  flat[#flat + 1] = count_name
  flat[#flat + 1] = count + 1
  least = math.min(least or count + 1, count + 1)
end
fml_del(key, stale)
fml_set(key, flat)
fml_expire(key, lease)
return least
