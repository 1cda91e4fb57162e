-- ferrisson script
-- operation: rate_limiter/inspect
-- protocol: 1
-- [ext] Reads a rate limiter without changing anything (its KindInspection: Client::inspect,
-- the `ferrisson` command-line tool): its settings and its overall window.
-- KEYS[1] the settings hash (every other key is derived from it, in its slot)
-- ARGV[1] the most members listed (unused: a window is summed, not listed)
-- returns false when the key holds something else than a rate limiter's settings; else facts,
--   each a list of strings whose first names it: {'type', t}, {'pttl', ms}, {'now', ms},
--   {'field', f, v} each setting, and (when an interval is set) {'window', value or '',
--   permits given in the window, members, oldest score or ''}
local name = KEYS[1]
local tagged = string.find(name, '{', 1, true) ~= nil
local function suffixed(s)
  if tagged then
    return name .. ':' .. s
  end
  return '{' .. name .. '}:' .. s
end
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
if main ~= 'hash' then
  return false
end
local settings = {rate = true, interval = true, type = true, keepAliveTime = true}
local fields = {}
local all = redis.call('hgetall', name)
for i = 1, #all, 2 do
  if not settings[all[i]] or not tonumber(all[i + 1]) then
    return false
  end
  fields[all[i]] = all[i + 1]
  out[#out + 1] = {'field', all[i], all[i + 1]}
end
if not fields['rate'] then
  return false
end
if not fields['interval'] then
  return out
end
local interval = tonumber(fields['interval'])
local value = ''
if key_type(suffixed('value')) == 'string' then
  value = redis.call('get', suffixed('value'))
end
local permits = suffixed('permits')
local given, members, oldest = 0, 0, ''
if key_type(permits) == 'zset' then
  local window = redis.call('zrangebyscore', permits, '(' .. (now - interval), '+inf', 'WITHSCORES')
  for i = 1, #window, 2 do
    local _, n = struct.unpack('Bc0I', window[i])
    given = given + n
    members = members + 1
    if oldest == '' then
      oldest = window[i + 1]
    end
  end
end
out[#out + 1] = {'window', value, tostring(given), tostring(members), oldest}
return out
