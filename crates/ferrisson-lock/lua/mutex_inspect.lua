-- ferrisson script
-- operation: lock/mutex_inspect
-- protocol: 1
-- [ext] Reads a lean mutex on the standard Redlock layout without changing anything (its
-- KindInspection: Client::inspect, the `ferrisson` command-line tool): the holder's token and
-- the fencing counter.
-- KEYS[1] the mutex's key (the fencing counter is derived from it, in its slot)
-- ARGV[1] the most members listed (unused: a mutex has one holder)
-- returns false when the key holds something else than a holder's token (a number is a
--   semaphore's count); else facts, each a list of strings whose first names it:
--   {'type', t}, {'pttl', ms}, {'now', ms}, {'value', the holder's token},
--   {'token', the last fencing token} when the mutex is fenced
local name = KEYS[1]
local tagged = string.find(name, '{', 1, true) ~= nil
local token_key = 'ferrisson_mutex_token:' .. (tagged and name or ('{' .. name .. '}'))
local function key_type(k)
  return redis.call('type', k)['ok']
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local main = key_type(name)
local out = {{'type', main}, {'pttl', tostring(redis.call('pttl', name))},
  {'now', string.format('%.0f', now)}}
if main == 'none' then
  return out
end
if main ~= 'string' then
  return false
end
local value = redis.call('get', name)
if tonumber(value) then
  return false
end
out[#out + 1] = {'value', value}
if key_type(token_key) == 'string' then
  out[#out + 1] = {'token', redis.call('get', token_key)}
end
return out
