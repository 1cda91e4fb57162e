-- ferrisson script
-- operation: rate_limiter/prelude
-- protocol: 1
-- A fragment, not run alone: the rate limiter's scripts start with it (Script::with_prelude)
-- and call its functions. The layout is Redisson's RRateLimiter (docs/protocol.md): the
-- settings hash (rate, interval ms, type "0" overall / "1" per client, keepAliveTime ms), the
-- permits left in a string and the permits given in the window in a ZSET of
-- struct.pack('Bc0I', #random, random, permits) scored by the time they were given (ms).
-- KEYS of every script: the settings hash, the overall value, this client's value, the overall
-- permits, this client's permits.

-- limiter_settings(key) is the settings {rate, interval, kind, keep} (numbers but kind, keep 0
-- without a keep-alive), or nil and whether the key is someone else's (a hash with another
-- field, or a field that is no number; a key of another type fails HGETALL with WRONGTYPE).
local function limiter_settings(key)
  local known = {rate = true, interval = true, type = true, keepAliveTime = true}
  local raw = redis.call('hgetall', key)
  local fields = {}
  for i = 1, #raw, 2 do
    if not known[raw[i]] or not tonumber(raw[i + 1]) then
      return nil, true
    end
    fields[raw[i]] = raw[i + 1]
  end
  if fields.rate == nil or fields.interval == nil or fields.type == nil then
    return nil, false
  end
  return {
    rate = tonumber(fields.rate),
    interval = tonumber(fields.interval),
    kind = fields.type,
    keep = tonumber(fields.keepAliveTime or '0'),
  }, false
end

-- limiter_foreign() is the error for a settings key that is no rate limiter's.
local function limiter_foreign()
  return redis.error_reply('WRONGTYPE the key holds no rate limiter of this synchronizer')
end

-- limiter_names(kind) is the value and permits keys the rate applies to: the overall ones, or
-- this client's for a per-client rate.
local function limiter_names(kind)
  if kind == '1' then
    return KEYS[3], KEYS[5]
  end
  return KEYS[2], KEYS[4]
end

-- limiter_now() is the server's clock in whole ms [ext] (Redisson passes the client's).
local function limiter_now()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- limiter_used(permitsName) is the permits given in the window: the sum over its members.
local function limiter_used(permitsName)
  local used = 0
  for _, v in ipairs(redis.call('zrange', permitsName, 0, -1)) do
    local _, permits = struct.unpack('Bc0I', v)
    used = used + permits
  end
  return used
end

-- limiter_left(s, valueName, permitsName, now) is the permits left once those given an
-- interval ago or more are back (Redisson's acquire: a missing value starts at the rate; the
-- permits back are added, and when that would pass the rate the value is recounted as the rate
-- less the permits still in the window, each member counted with its permits).
local function limiter_left(s, valueName, permitsName, now)
  local current = redis.call('get', valueName)
  if current == false then
    redis.call('set', valueName, s.rate)
    return s.rate
  end
  current = tonumber(current) or 0
  local back = redis.call('zrangebyscore', permitsName, 0, now - s.interval)
  local released = 0
  for _, v in ipairs(back) do
    local _, permits = struct.unpack('Bc0I', v)
    released = released + permits
  end
  if released > 0 then
    redis.call('zremrangebyscore', permitsName, 0, now - s.interval)
    if current + released > s.rate then
      current = s.rate - limiter_used(permitsName)
    else
      current = current + released
    end
    redis.call('set', valueName, current)
  end
  return current
end

-- limiter_refilled(s, valueName, permitsName, current) is `current`, or the rate when the
-- window holds no permit at all [ext]: nothing given is outstanding, so every permit is free
-- (a value left below the rate by a release of Redisson's that gave permits back without
-- taking them out of the window would otherwise never rise again).
local function limiter_refilled(s, valueName, permitsName, current)
  if current < s.rate and redis.call('zcard', permitsName) == 0 then
    redis.call('set', valueName, s.rate)
    return s.rate
  end
  return current
end

-- limiter_keep_alive(s, valueName, permitsName): with a keep-alive, every key the call used
-- lives that long again (Redisson's acquire and release refresh it the same way); without, the
-- value and the permits take the settings' TTL, if any.
local function limiter_keep_alive(s, valueName, permitsName)
  if s.keep > 0 then
    redis.call('pexpire', KEYS[1], s.keep)
    redis.call('pexpire', valueName, s.keep)
    redis.call('pexpire', permitsName, s.keep)
  else
    local ttl = redis.call('pttl', KEYS[1])
    if ttl > 0 then
      redis.call('pexpire', valueName, ttl)
      redis.call('pexpire', permitsName, ttl)
    end
  end
end
