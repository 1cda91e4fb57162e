-- ferrisson script
-- operation: faster_multilock/force_release
-- protocol: 1
-- Release values of a group whoever holds them (Redisson's RFasterMultiLock forceUnlock), or
-- every value of the group, and tell the group's waiters (fml_wake).
-- KEYS[1] the group hash
-- ARGV[1] publish command ("publish", "spublish")
-- ARGV[2] "- <field> <field> ...": the values to release (none: every value of the group)
-- returns how many held values were released; WRONGTYPE error when the key holds no group
local foreign = fml_foreign(KEYS[1])
if foreign then
  return foreign
end
local key = KEYS[1]
local _, fields = fml_hold(ARGV[2])
if #fields == 0 then
  -- A value's field is the only one without a colon.
  for _, field in ipairs(redis.call('hkeys', key)) do
    if not string.find(field, ':', 1, true) then
      fields[#fields + 1] = field
    end
  end
end
local holders, _, live = fml_read(key, fields, '-', fml_now())
local released, freed, gone = 0, {}, {}
for i = 1, #fields do
  local holder = holders[i]
  if holder then
    local end_name, count_name = fml_names(fields[i], holder)
    gone[#gone + 1] = fields[i]
    gone[#gone + 1] = end_name
    gone[#gone + 1] = count_name
    freed[#freed + 1] = fields[i]
    if live[i] then
      released = released + 1
    end
  end
end
fml_del(key, gone)
fml_wake(ARGV[1], prefixed('redisson_lock__channel', key), fml_mask(freed))
return released
