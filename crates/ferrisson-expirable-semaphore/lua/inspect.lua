-- ferrisson script
-- operation: expirable_semaphore/inspect
-- protocol: 1
-- [ext] Reads a permit-expirable semaphore (Redisson's RPermitExpirableSemaphore layout)
-- without changing anything (its KindInspection: Client::inspect, the `ferrisson`
-- command-line tool): its count, its taken permits with their expiries and the reservation of
-- a waiter for several permits. It starts with core/inspect_prelude.
-- KEYS[1] the count (every other key is derived from it, in its slot)
-- ARGV[1] the most taken permits listed
-- ARGV[2] "1" when the caller named the kind: a bare count (a semaphore's, or this kind's
--         with no permit taken) is then this kind's
-- returns false when the key holds something else than a count, or (not named) a bare count
--   with no taken permits; else facts, each a list of strings whose first names it:
--   {'type', t}, {'pttl', ms}, {'now', ms}, {'value', count},
--   {'permits_taken', live n, expired n}, {'permit', id in hex, expiry ms} each live one
--   listed, {'reservation', value, pttl}. Taken permits outlive a deleted count: then the
--   type is none and the permits are still told.
local name = KEYS[1]
local limit = tonumber(ARGV[1]) or 100
local out, main, now = inspect_head(name)
if main ~= 'none' and main ~= 'string' then
  return false
end
if main == 'string' then
  local value = redis.call('get', name)
  if not tonumber(value) then
    return false
  end
  inspect_fact(out, 'value', value)
end
local taken = inspect_suffixed(name, 'timeout')
local has_taken = redis.call('type', taken)['ok'] == 'zset'
if not has_taken then
  if main == 'none' then
    return out
  end
  if ARGV[2] ~= '1' then
    return false
  end
else
  local live = redis.call('zcount', taken, '(' .. now, '+inf')
  inspect_fact(out, 'permits_taken', live, redis.call('zcard', taken) - live)
  local members = redis.call('zrangebyscore', taken, '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, limit)
  for i = 1, #members, 2 do
    local hex = string.gsub(members[i], '.', function(c)
      return string.format('%02x', string.byte(c))
    end)
    inspect_fact(out, 'permit', hex, members[i + 1])
  end
end
local intent_key = inspect_suffixed(name, 'intent')
if redis.call('type', intent_key)['ok'] == 'string' then
  inspect_fact(out, 'reservation', redis.call('get', intent_key), redis.call('pttl', intent_key))
end
return out
