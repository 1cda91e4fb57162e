-- ferrisson script
-- operation: rwlock/inspect
-- protocol: 1
-- [ext] Reads a read-write lock (Redisson's RReadWriteLock layout) without changing anything
-- (its KindInspection: Client::inspect, the `ferrisson` command-line tool): its hash, the
-- longest lease of each reader's holds and the fencing counter. It starts with
-- core/inspect_prelude.
-- KEYS[1] the lock hash (every other key is derived from it, in its slot)
-- ARGV[1] the most read holds of one reader whose leases are read
-- ARGV[2] "1" when the caller named the kind (a read-write lock's layout is never another's:
--         unused)
-- returns false when the key holds anything but a read-write lock's hash (a `mode` of "read"
--   or "write", every other field an owner holding a positive count); else facts, each a list
--   of strings whose first names it: {'type', t}, {'pttl', ms}, {'now', ms}, {'field', f, v}
--   each field, {'read_lease', owner, longest PTTL of its read holds} each reader,
--   {'token', v} the fencing counter
local name = KEYS[1]
local limit = tonumber(ARGV[1]) or 100
local out, main = inspect_head(name)
if main ~= 'hash' then
  return inspect_elsewhere(out, main)
end
local all = redis.call('hgetall', name)
local fields = {}
for i = 1, #all, 2 do
  fields[all[i]] = all[i + 1]
end
local mode = fields['mode']
if mode ~= 'read' and mode ~= 'write' then
  return false
end
for field, count in pairs(fields) do
  if field ~= 'mode' and (not string.match(field, ':%d+$') and not string.match(field, ':%d+:write$')
      or not string.match(count, '^%d+$')) then
    return false
  end
end
local base = string.find(name, '{', 1, true) and name or ('{' .. name .. '}')
for field, count in pairs(fields) do
  inspect_fact(out, 'field', field, count)
  if field ~= 'mode' and string.sub(field, -6) ~= ':write' then
    local longest = -2
    for i = 1, math.min(tonumber(count) or 0, limit) do
      local ttl = redis.call('pttl', base .. ':' .. field .. ':rwlock_timeout:' .. i)
      if ttl > longest then
        longest = ttl
      end
    end
    inspect_fact(out, 'read_lease', field, longest)
  end
end
inspect_token(out, name)
return out
