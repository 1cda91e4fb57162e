-- ferrisson script
-- operation: rate_limiter/inspect
-- protocol: 1
-- [ext] Reads a rate limiter without changing anything (its KindInspection: Client::inspect,
-- the `ferrisson` command-line tool): its settings and its overall window. It starts with
-- core/inspect_prelude.
-- KEYS[1] the settings hash (every other key is derived from it, in its slot)
-- ARGV[1] the most members listed (unused: a window is summed, not listed)
-- returns false when the key holds something else than a rate limiter's settings; else facts,
--   each a list of strings whose first names it: {'type', t}, {'pttl', ms}, {'now', ms},
--   {'field', f, v} each setting, and (when an interval is set) {'window', value or '',
--   permits given in the window, members, oldest score or ''}
local name = KEYS[1]
local out, main, now = inspect_head(name)
if main ~= 'hash' then
  return inspect_elsewhere(out, main)
end
local settings = {rate = true, interval = true, type = true, keepAliveTime = true}
local fields = {}
local all = redis.call('hgetall', name)
for i = 1, #all, 2 do
  if not settings[all[i]] or not tonumber(all[i + 1]) then
    return false
  end
  fields[all[i]] = all[i + 1]
  inspect_fact(out, 'field', all[i], all[i + 1])
end
if not fields['rate'] then
  return false
end
if not fields['interval'] then
  return out
end
local interval = tonumber(fields['interval'])
local value = ''
local value_key = inspect_suffixed(name, 'value')
if redis.call('type', value_key)['ok'] == 'string' then
  value = redis.call('get', value_key)
end
local permits = inspect_suffixed(name, 'permits')
local given, members, oldest = 0, 0, ''
if redis.call('type', permits)['ok'] == 'zset' then
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
inspect_fact(out, 'window', value, given, members, oldest)
return out
