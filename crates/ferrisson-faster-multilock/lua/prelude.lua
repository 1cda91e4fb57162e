-- ferrisson script
-- operation: faster_multilock/prelude
-- protocol: 1
-- A fragment, not run alone: the faster multi-lock's scripts start with it (after
-- core/lock_prelude and core/release_prelude, Script::with_prelude) and call its functions.
--
-- The layout is Redisson's RFasterMultiLock (getFasterMultiLock(group, values)): one hash per
-- group, and per locked value, under the value's field (Redisson's 128-bit HighwayHash of the
-- encoded value, in base64 without its padding):
--   <field>                         -> the holder, "<client-id>:<n>"
--   <field>:<holder>:expire_time    -> when the value's lease ends, epoch ms
--   <field>:<holder>:lock_count     -> the holder's holds of the value
-- The hash itself expires no earlier than the longest of its values' leases. A value is held
-- while its expire_time is in the future. ferrisson reads the time from the server's clock
-- [ext]; Redisson passes its own clock.
--
-- A hold is named by one argument, "<owner> <field> <field> ...": the watchdog renews a hold
-- by its key and that argument, and the acquire and release take the same.

-- fml_now() is the server's clock in epoch ms.
local function fml_now()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- fml_hold(arg) is the owner and the list of fields of a hold argument.
local function fml_hold(arg)
  local owner, fields = nil, {}
  for word in string.gmatch(arg, '%S+') do
    if owner then
      fields[#fields + 1] = word
    else
      owner = word
    end
  end
  return owner, fields
end

-- fml_holder(key, field, now) is the value's holder and the end of its lease while the lease
-- runs; nil and the last holder (if any) once it has run out or nobody holds it.
local function fml_holder(key, field, now)
  local holder = redis.call('hget', key, field)
  if not holder then
    return nil
  end
  local expires = tonumber(redis.call('hget', key, field .. ':' .. holder .. ':expire_time'))
  if not expires or expires <= now then
    return nil, holder
  end
  return holder, expires
end

-- fml_clear(key, field, holder) deletes a value's three fields.
local function fml_clear(key, field, holder)
  redis.call('hdel', key, field, field .. ':' .. holder .. ':expire_time',
    field .. ':' .. holder .. ':lock_count')
end

-- fml_extend(key, field, owner, at) moves the value's lease end to `at` unless it is later.
local function fml_extend(key, field, owner, at)
  local name = field .. ':' .. owner .. ':expire_time'
  if (tonumber(redis.call('hget', key, name)) or 0) < at then
    redis.call('hset', key, name, string.format('%d', at))
  end
end

-- fml_expire(key, lease) keeps the hash alive for at least `lease` ms.
local function fml_expire(key, lease)
  if redis.call('pttl', key) < lease then
    redis.call('pexpire', key, lease)
  end
end

-- fml_foreign(key) is a WRONGTYPE error reply when `key` holds anything but a group's hash (a
-- group's hash always has an expiry), else nil.
local function fml_foreign(key)
  local kind = redis.call('type', key).ok
  if kind ~= 'none' and (kind ~= 'hash' or redis.call('pttl', key) == -1) then
    return redis.error_reply('WRONGTYPE the key holds no faster multi-lock group')
  end
  return nil
end

-- fml_bit(field) is the bit of the value in a release's wake-up mask (0..51).
local function fml_bit(field)
  local a, b = string.byte(field, 1, 2)
  return ((a or 0) * 256 + (b or 0)) % 52
end

-- fml_wake(command, channel, freed) tells the group's waiters that the values whose bits are
-- the keys of `freed` are free: "1" first, which wakes every Redisson waiter of the group
-- (LockPubSub's READ_UNLOCK_MESSAGE; each waits for values of its own), then [ext] 2^52 plus
-- the mask of the freed values' bits, which Redisson ignores and which wakes only the
-- ferrisson waiters that want one of them. Returns how many subscribers the mask reached (0
-- when nothing was freed or `command` is "").
local function fml_wake(command, channel, freed)
  if command == '' or next(freed) == nil then
    return 0
  end
  local mask = 0
  for bit in pairs(freed) do
    mask = mask + 2 ^ bit
  end
  redis.call(command, channel, '1')
  return redis.call(command, channel, string.format('%d', 2 ^ 52 + mask))
end
