-- ferrisson script
-- operation: faster_multilock/inspect
-- protocol: 1
-- [ext] Reads a faster multi-lock group (Redisson's RFasterMultiLock layout,
-- faster_multilock/prelude) without changing anything (its KindInspection: Client::inspect, the
-- `ferrisson` command-line tool). It starts with core/inspect_prelude.
-- KEYS[1] the group hash
-- ARGV[1] the most values listed
-- ARGV[2] "1" when the caller named the kind (unused: the layout is the kind's own)
-- returns false when the key holds anything but a group's hash: one with an expiry, at least
--   one value, and nothing else (every field a value's 22-character field holding its holder,
--   "<id>:<n>", or "<field>:<holder>:expire_time" or ":lock_count" holding a number); else facts, each a
--   list of strings whose first names it: {'type', t}, {'pttl', ms}, {'now', ms},
--   {'value', field, holder, count, expire_time} for each value whose lease runs (at most
--   ARGV[1]), {'values', n} how many such values there are
local name = KEYS[1]
local out, main, now = inspect_head(name)
if main ~= 'hash' then
  return inspect_elsewhere(out, main)
end
if redis.call('pttl', name) < 0 then
  return false
end
local all = redis.call('hgetall', name)
local values = {}
local value_field = '^' .. string.rep('[%w+/]', 22) .. '$'
for i = 1, #all, 2 do
  local field, value = all[i], all[i + 1]
  if string.find(field, value_field) and string.find(value, ':%d+$') then
    values[#values + 1] = {field, value}
  elseif not tonumber(value) or not (string.find(field, '^' .. string.rep('[%w+/]', 22) .. ':.+:expire_time$')
    or string.find(field, '^' .. string.rep('[%w+/]', 22) .. ':.+:lock_count$')) then
    return false
  end
end
if #values == 0 then
  return false
end
local held, limit = 0, tonumber(ARGV[1]) or 0
for _, v in ipairs(values) do
  local field, holder = v[1], v[2]
  local expires = tonumber(redis.call('hget', name, field .. ':' .. holder .. ':expire_time'))
  if expires and expires >= now then
    held = held + 1
    if held <= limit then
      local count = redis.call('hget', name, field .. ':' .. holder .. ':lock_count') or '0'
      inspect_fact(out, 'value', field, holder, count, expires)
    end
  end
end
inspect_fact(out, 'values', held)
return out
