-- ferrisson script
-- operation: core/lock_prelude
-- protocol: 1
-- A fragment, not run alone: the lock scripts start with it (Script::with_prelude) and call its
-- functions.
--
-- It starts with core/token_prelude (next_token), which scripts that need no other function
-- start with alone.
--
-- foreign_lock(key, rw) is a WRONGTYPE error reply when the hash at `key` is not a lock of the
-- caller's family, nil when it is one (or the key is missing), so that a lock never waits on,
-- writes into or deletes a user's hash. `rw` true: a read-write lock, whose hash always has a
-- `mode` field of "read" or "write". Otherwise a reentrant or fair lock, which has none. Locks
-- always carry an expiry; a hash without one is also checked field by field: every field but
-- `mode` must be an owner ("<id>:<n>", or "<id>:<n>:write") holding a positive count.
local function foreign_lock(key, rw)
  local kind = redis.call('type', key).ok
  if kind == 'none' then
    return nil
  end
  local wrong = redis.error_reply('WRONGTYPE the key holds no lock of this kind')
  if kind ~= 'hash' then
    return wrong
  end
  local mode = redis.call('hget', key, 'mode')
  if rw ~= (mode == 'read' or mode == 'write') or (not rw and mode) then
    return wrong
  end
  if redis.call('pttl', key) == -1 then
    local all = redis.call('hgetall', key)
    for i = 1, #all, 2 do
      local field, count = all[i], tonumber(all[i + 1])
      if field ~= 'mode' then
        local owner = string.find(field, ':%d+$') or string.find(field, ':%d+:write$')
        if not owner or not count or count < 1 then
          return wrong
        end
      end
    end
  end
  return nil
end

-- held_ttl(key) is the PTTL of the lock hash at `key` when another owner holds it, or nil and a
-- WRONGTYPE error reply when the hash is no lock of the RLock family (a user's hash): never
-- wait on that. A lock of the family has an expiry and no `mode` field: only a hash that lacks
-- the one or has the other is looked at field by field (foreign_lock), so that a refusal,
-- which every waiter's try meets, costs two reads.
local function held_ttl(key)
  local ttl = redis.call('pttl', key)
  if ttl == -1 or redis.call('hexists', key, 'mode') == 1 then
    local foreign = foreign_lock(key, false)
    if foreign then
      return nil, foreign
    end
  end
  return ttl
end

-- foreign_object(key, shape) is foreign_lock for the lock shapes ("lock", "rwlock") and, for
-- "count" (a string holding an integer), "value" (a string) and "numbers:<f1>,<f2>,..." (a hash
-- whose every field is one of the names listed and holds a number: a rate limiter's settings), a
-- WRONGTYPE error reply when the key holds something else; nil when it is of the shape or
-- missing.
local function foreign_object(key, shape)
  if shape == 'lock' or shape == 'rwlock' then
    return foreign_lock(key, shape == 'rwlock')
  end
  local kind = redis.call('type', key).ok
  if kind == 'none' then
    return nil
  end
  local fields = string.match(shape, '^numbers:(.*)$')
  local wrong = redis.error_reply('WRONGTYPE the key holds no '
    .. (fields and ('hash of numbers (' .. fields .. ')') or shape) .. ' of this synchronizer')
  if fields and kind == 'hash' then
    local allowed = {}
    for field in string.gmatch(fields, '[^,]+') do
      allowed[field] = true
    end
    local all = redis.call('hgetall', key)
    for i = 1, #all, 2 do
      if not allowed[all[i]] or not tonumber(all[i + 1]) then
        return wrong
      end
    end
    return nil
  end
  if shape == 'count' and kind == 'string' and tonumber(redis.call('get', key)) then
    return nil
  end
  if shape == 'value' and kind == 'string' then
    return nil
  end
  return wrong
end

-- prefixed(prefix, name) is the key or channel `prefix` names for the object `name`, by
-- keys::prefixed's rule (Redisson's prefixName): "<prefix>:<name>" when the name carries a hash
-- tag, else "<prefix>:{<name>}", so that it lands in the name's slot. Scripts derive the keys
-- they touch only on rare paths this way instead of taking them as arguments: each argument
-- costs Redis about 0.14 us to parse and hand to Lua, on every call.
local function prefixed(prefix, name)
  if string.find(name, '{', 1, true) then
    return prefix .. ':' .. name
  end
  return prefix .. ':{' .. name .. '}'
end

-- server_ms() is the server's clock in epoch milliseconds.
local function server_ms()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
