-- ferrisson script
-- operation: core/inspect_prelude
-- protocol: 1
-- [ext] A fragment, not run alone: every inspection script starts with it (core/inspect, and
-- the scripts kinds register with their own crates: Client::inspect, the `ferrisson` tool)
-- and calls its functions. Nothing here writes.
--
-- inspect_head(name) reads the server's clock and the main key's type, and starts the reply
-- with the facts every inspection reply begins with: {'now', ms}, {'type', t}, {'pttl', ms}.
-- It returns the reply table, the type and the clock in whole ms, floored as the synchronizers'
-- own scripts floor it: what this calls live (a permit whose expiry is after it, a rate
-- window's permit) is what their scripts keep. Up to a millisecond behind the true time, it
-- never frees or keeps anything itself (nothing here writes); a lease left reckoned from it
-- must take that millisecond off, as the expirable semaphore's does, so that no lease is shown
-- longer than the server gives it. Holds' leases are the server's own PTTLs.
-- inspect_fact(out, name, ...) adds a fact, its values as strings (numbers without decimals).
-- inspect_elsewhere(out, main) is the reply of a kind's script whose main key is not of its
-- type: the head alone when nothing is stored (`main` 'none'), else false (another layout).
-- inspect_prefixed(name, p) and inspect_suffixed(name, s) are the keys derived from `name` as
-- docs/protocol.md names them (keys::prefixed, keys::suffixed), in its slot.
-- inspect_lock_hash(name) is the HGETALL of a lock hash (RLock's layout: every field an owner
-- "<id>:<n>" holding a count), or nil when the hash holds anything else.
-- inspect_token(out, name) adds {'token', v}, the lock's fencing counter, when there is one.
local function inspect_fact(out, ...)
  local f = {}
  for i, v in ipairs({...}) do
    if type(v) == 'number' then
      f[i] = string.format('%.0f', v)
    else
      f[i] = tostring(v)
    end
  end
  out[#out + 1] = f
end

local function inspect_head(name)
  local t = redis.call('time')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local main = redis.call('type', name)['ok']
  local out = {}
  inspect_fact(out, 'now', now)
  inspect_fact(out, 'type', main)
  inspect_fact(out, 'pttl', redis.call('pttl', name))
  return out, main, now
end

local function inspect_prefixed(name, p)
  if string.find(name, '{', 1, true) then
    return p .. ':' .. name
  end
  return p .. ':{' .. name .. '}'
end

local function inspect_suffixed(name, s)
  if string.find(name, '{', 1, true) then
    return name .. ':' .. s
  end
  return '{' .. name .. '}:' .. s
end

local function inspect_elsewhere(out, main)
  if main == 'none' then
    return out
  end
  return false
end

local function inspect_lock_hash(name)
  local all = redis.call('hgetall', name)
  for i = 1, #all, 2 do
    if not string.match(all[i], ':%d+$') or not string.match(all[i + 1], '^%d+$') then
      return nil
    end
  end
  return all
end

local function inspect_token(out, name)
  local token_key = inspect_prefixed(name, 'redisson_lock_token')
  if redis.call('type', token_key)['ok'] == 'string' then
    inspect_fact(out, 'token', redis.call('get', token_key))
  end
end
