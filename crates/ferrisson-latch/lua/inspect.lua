-- ferrisson script
-- operation: latch/inspect
-- protocol: 1
-- [ext] Reads a countdown latch without changing anything (its KindInspection:
-- Client::inspect, the `ferrisson` command-line tool): its count and the participants counted
-- this round. It starts with core/inspect_prelude.
-- KEYS[1] the count (every other key is derived from it, in its slot)
-- ARGV[1] the most participants listed
-- ARGV[2] "1" when the caller named the kind: a bare count (a latch armed by Redisson, or a
--         semaphore's) is then a latch
-- returns false when the key holds no count, or (not named) a bare count with no round or
--   participants of this library's latch; else facts, each a list of strings whose first names
--   it: {'type', t}, {'pttl', ms}, {'now', ms}, {'value', count}, {'round', v},
--   {'participants', n} and {'participant', id} each listed
local name = KEYS[1]
local limit = tonumber(ARGV[1]) or 100
local out, main = inspect_head(name)
if main ~= 'string' then
  return inspect_elsewhere(out, main)
end
local value = redis.call('get', name)
if not tonumber(value) then
  return false
end
inspect_fact(out, 'value', value)
local round_key, counted = inspect_suffixed(name, 'round'), inspect_suffixed(name, 'counted')
local ours = false
if redis.call('type', round_key)['ok'] == 'string' then
  inspect_fact(out, 'round', redis.call('get', round_key))
  ours = true
end
if redis.call('type', counted)['ok'] == 'set' then
  inspect_fact(out, 'participants', redis.call('scard', counted))
  for _, id in ipairs(redis.call('srandmember', counted, limit)) do
    inspect_fact(out, 'participant', id)
  end
  ours = true
end
if not ours and ARGV[2] ~= '1' then
  return false
end
return out
