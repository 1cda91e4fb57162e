-- ferrisson script
-- operation: core/inspect
-- protocol: 1
-- [ext] Reads everything the layouts of docs/protocol.md keep about one object, without
-- changing anything (Client::inspect, the `ferrisson` command-line tool): the main key and
-- every key derived from its name, whichever kind it is. The caller decides the kind.
-- KEYS[1] the main key (every other key is derived from it, in its slot)
-- returns facts, each a list of strings whose first names it:
--   {'now', ms} the server's clock; {'type', t} and {'pttl', ms} of the main key;
--   {'field', f, v} each field of a hash; {'value', v} a string's value;
--   {'token', v} the fencing counter;
--   {'reservation', value, pttl} a semaphore's reservation for a large waiter
-- (kinds registered by their own crates read their layouts with scripts of their own)
local name = KEYS[1]
local out, main = inspect_head(name)
local function fact(...)
  inspect_fact(out, ...)
end
local function prefixed(p)
  return inspect_prefixed(name, p)
end
local function suffixed(s)
  return inspect_suffixed(name, s)
end
local function key_type(k)
  return redis.call('type', k)['ok']
end
local function string_at(k)
  if key_type(k) == 'string' then
    return redis.call('get', k)
  end
  return nil
end

if main == 'hash' then
  local all = redis.call('hgetall', name)
  for i = 1, #all, 2 do
    fact('field', all[i], all[i + 1])
  end
elseif main == 'string' then
  fact('value', redis.call('get', name))
end

local token = string_at(prefixed('redisson_lock_token'))
if token then
  fact('token', token)
end

-- A semaphore's reservation for a waiter of several permits.
local intent_key = suffixed('intent')
local intent = string_at(intent_key)
if intent then
  fact('reservation', intent, redis.call('pttl', intent_key))
end

return out
