-- ferrisson script
-- operation: spin_lock/inspect
-- protocol: 1
-- [ext] Reads a spin lock (Redisson's RSpinLock layout, the reentrant lock's hash, with
-- ferrisson's next-in-line reservation) without changing anything (its KindInspection:
-- Client::inspect, the `ferrisson` command-line tool). It starts with core/inspect_prelude.
-- KEYS[1] the lock hash (every other key is derived from it, in its slot)
-- ARGV[1] the most members listed (unused: one reservation at most)
-- ARGV[2] "1" when the caller named the kind: a lock hash with no reservation beside it is then
--         a spin lock's (an idle spin lock and a reentrant lock look alike)
-- returns false when the key holds anything but a lock hash (every field an owner holding a
--   positive count), or, the kind not named, when no reservation stands beside it; else facts,
--   each a list of strings whose first names it: {'type', t}, {'pttl', ms}, {'now', ms},
--   {'field', owner, count} each hold, {'token', v} the fencing counter of a fenced one,
--   {'reserved', "<since>|<at>|<owner>", pttl} the next-in-line reservation
local name = KEYS[1]
local named = ARGV[2] == '1'
local out, main = inspect_head(name)
if main ~= 'hash' then
  return inspect_elsewhere(out, main)
end
local all = inspect_lock_hash(name)
if not all then
  return false
end
local next_key = inspect_suffixed(name, 'next')
local reserved = redis.call('type', next_key)['ok'] == 'string'
if not reserved and not named then
  return false
end
for i = 1, #all, 2 do
  inspect_fact(out, 'field', all[i], all[i + 1])
end
inspect_token(out, name)
if reserved then
  inspect_fact(out, 'reserved', redis.call('get', next_key), redis.call('pttl', next_key))
end
return out
