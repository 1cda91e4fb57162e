-- ferrisson script
-- operation: lock/mutex_inspect
-- protocol: 1
-- [ext] Reads a lean mutex on the standard Redlock layout without changing anything (its
-- KindInspection: Client::inspect, the `ferrisson` command-line tool): the holder's token and
-- the fencing counter. It starts with core/inspect_prelude.
-- KEYS[1] the mutex's key (the fencing counter is derived from it, in its slot)
-- ARGV[1] the most members listed (unused: a mutex has one holder)
-- returns false when the key holds something else than a holder's token (a number is a
--   semaphore's count); else facts, each a list of strings whose first names it:
--   {'type', t}, {'pttl', ms}, {'now', ms}, {'value', the holder's token},
--   {'token', the last fencing token} when the mutex is fenced
local name = KEYS[1]
local token_key = inspect_prefixed(name, 'ferrisson_mutex_token')
local out, main = inspect_head(name)
if main ~= 'string' then
  return inspect_elsewhere(out, main)
end
local value = redis.call('get', name)
if tonumber(value) then
  return false
end
inspect_fact(out, 'value', value)
if redis.call('type', token_key)['ok'] == 'string' then
  inspect_fact(out, 'token', redis.call('get', token_key))
end
return out
