-- ferrisson script
-- operation: faster_multilock/acquire
-- protocol: 1
-- Take every value of a hold at once, or none (Redisson's RFasterMultiLock tryLockInner): a
-- value held by another owner whose lease runs makes the call wait; the owner's own values are
-- re-entered (their lock_count grows). A value whose lease ran out is taken over, and its last
-- holder's fields are deleted [ext] (Redisson leaves them until the hash expires).
-- KEYS[1] the group hash
-- KEYS[2] the client's undone marks on the group [ext] (core/marks_prelude): a copy of a resent
--   call that ran takes nothing
-- ARGV[1] lease in milliseconds
-- ARGV[2] (a retry only) the holds the client believes the owner has of these values, else ""
-- ARGV[3] the call's sequence number (its resends carry it too)
-- ARGV[4] the owner, ARGV[5..] the hold's fields (fml_args; its hold argument's words, each
--   an argument of its own)
-- returns the owner's holds of the values (the least of their lock counts) when taken,
--   {0, ms} when another owner holds a value (ms: the longest lease left among such values,
--   at least 1: a value is held through the millisecond its expire_time names), {0, 0} from a
--   copy of a call that another copy ran before; WRONGTYPE error when the key holds no group
local foreign, absent = fml_foreign(KEYS[1])
if foreign then
  return foreign
end
local late = late_copy(KEYS[2], ARGV[3], ARGV[2] ~= '' or nil)
local key, lease = KEYS[1], tonumber(ARGV[1])
local owner, fields = fml_args(ARGV, 4)
local now = fml_now()
local until_ms = now + lease
local until_arg = string.format('%d', until_ms)
local end_suffix, count_suffix = ':' .. owner .. ':expire_time', ':' .. owner .. ':lock_count'
if absent and late then
  return {0, 0}
end
if absent then
  -- No value of the group is held: each is taken anew, with a count of 1 (the usual call, so
  -- it reads nothing and loops once).
  local flat = {}
  for i = 1, #fields do
    local field, n = fields[i], 6 * i
    flat[n - 5], flat[n - 4], flat[n - 3] = field, owner, field .. end_suffix
    flat[n - 2], flat[n - 1], flat[n] = until_arg, field .. count_suffix, '1'
  end
  fml_set(key, flat)
  redis.call('pexpire', key, lease)
  return 1
end
local holders, ends, live, counts = fml_read(key, fields, owner, now)
local busy, least = -1, nil
for i = 1, #fields do
  if live[i] and holders[i] ~= owner then
    busy = math.max(busy, ends[i] - now + 1)
  end
  least = math.min(least or counts[i], counts[i])
end
if busy >= 0 then
  return {0, busy}
end
local flat, stale = {}, {}
if ARGV[2] ~= '' and least == tonumber(ARGV[2]) + 1 then
  -- The lost attempt ran: these holds are the ones it took.
  fml_extend(key, fields, owner, ends, now, lease)
  return least
end
if late then
  return {0, 0}
end
least = nil
for i = 1, #fields do
  local field, holder = fields[i], holders[i]
  if holder and holder ~= owner then
    -- Its last holder's lease ran out: nothing of that hold is left.
    local stale_end, stale_count = fml_names(field, holder)
    stale[#stale + 1] = stale_end
    stale[#stale + 1] = stale_count
  end
  local end_name, count_name = field .. end_suffix, field .. count_suffix
  local n = #flat
  flat[n + 1] = field
  flat[n + 2] = owner
  flat[n + 3] = end_name
  if live[i] and ends[i] > until_ms then
    flat[n + 4] = string.format('%d', ends[i])
  else
    flat[n + 4] = until_arg
  end
  flat[n + 5] = count_name
  -- A string: Redis would format a Lua number for every value.
  flat[n + 6] = counts[i] == 0 and '1' or string.format('%d', counts[i] + 1)
  least = math.min(least or counts[i] + 1, counts[i] + 1)
end
fml_del(key, stale)
fml_set(key, flat)
fml_expire(key, lease)
return least
