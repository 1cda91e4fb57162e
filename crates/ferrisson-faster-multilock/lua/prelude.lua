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
-- until the clock has passed its expire_time: through the millisecond it names, as Redis keeps a
-- key through the millisecond its PEXPIRE names. The clock here is the server's `TIME` floored
-- to whole ms (fml_now), up to a millisecond behind the true time, so an expire_time written as
-- now + lease may lie up to a millisecond before the true end of the lease; a value freed only
-- once now > expire_time is freed after it, never before the deadline the client counts from
-- the send time of its call (docs/guarantees.md, "Clocks"). ferrisson reads the server's clock
-- [ext]; Redisson passes its own (and holds a value while expire_time > its now).
--
-- A hold is named by one argument, "<owner> <field> <field> ..." (fml_hold): the watchdog
-- renews a hold by its key and that argument. The acquire and the release take the same words
-- as arguments of their own (fml_args). The scripts read
-- and write a hold's values with a few HMGETs and HSETs whatever their number (fml_read,
-- fml_set, fml_del), not a command per value, and a handle takes at most 1,000 values
-- (MAX_VALUES): Redis runs nothing else while a script runs.

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

-- fml_args(argv, from) is the owner and the list of fields of a hold given word by word: the
-- owner in argv[from], its fields in the arguments after it (`argv`: the call's ARGV, which a
-- batch passes its calls as a parameter). The acquire and the release take their hold so,
-- which spares them splitting a string.
local function fml_args(argv, from)
  local fields = {}
  for i = from + 1, #argv do
    fields[i - from] = argv[i]
  end
  return argv[from], fields
end

-- fml_get(key, names) is the values of the hash fields `names` (false where missing), read
-- with HMGET in chunks (Lua passes at most a few thousand arguments to a call).
local function fml_get(key, names)
  if #names <= 1000 then
    return redis.call('hmget', key, unpack(names))
  end
  local out = {}
  for i = 1, #names, 1000 do
    local part = redis.call('hmget', key, unpack(names, i, math.min(i + 999, #names)))
    for j = 1, #part do
      out[i + j - 1] = part[j]
    end
  end
  return out
end

-- fml_set(key, flat) sets the fields and values of the list {field, value, field, value, ...},
-- fml_del(key, names) deletes the fields `names`, each in chunks.
local function fml_set(key, flat)
  for i = 1, #flat, 1000 do
    redis.call('hset', key, unpack(flat, i, math.min(i + 999, #flat)))
  end
end

local function fml_del(key, names)
  for i = 1, #names, 1000 do
    redis.call('hdel', key, unpack(names, i, math.min(i + 999, #names)))
  end
end

-- fml_read(key, fields, owner, now) reads every value of a hold: four lists by the values'
-- order, their holders (false: none), lease ends (nil: none), whether their leases run, and
-- the owner's counts (0 where the owner does not hold the value live). One HMGET for free
-- values; the lease ends only of values with a holder, the counts only of the owner's. A lease
-- runs while its end is not before `now` (see above).
local function fml_read(key, fields, owner, now)
  local holders = fml_get(key, fields)
  local names, at = {}, {}
  for i = 1, #fields do
    if holders[i] then
      names[#names + 1] = fields[i] .. ':' .. holders[i] .. ':expire_time'
      at[#at + 1] = i
    end
  end
  local ends, live, counts = {}, {}, {}
  for i = 1, #fields do
    live[i] = false
    counts[i] = 0
  end
  if #names == 0 then
    return holders, ends, live, counts
  end
  local read = fml_get(key, names)
  local own, own_at = {}, {}
  for j = 1, #at do
    local i, t = at[j], tonumber(read[j])
    ends[i] = t
    live[i] = t ~= nil and t >= now
    if live[i] and holders[i] == owner then
      own[#own + 1] = fields[i] .. ':' .. owner .. ':lock_count'
      own_at[#own_at + 1] = i
    end
  end
  if #own > 0 then
    local read_counts = fml_get(key, own)
    for j = 1, #own_at do
      counts[own_at[j]] = tonumber(read_counts[j]) or 0
    end
  end
  return holders, ends, live, counts
end

-- fml_names(field, holder) is a value's lease and count field names for `holder`.
local function fml_names(field, holder)
  return field .. ':' .. holder .. ':expire_time', field .. ':' .. holder .. ':lock_count'
end

-- fml_expire(key, lease) keeps the hash alive for at least `lease` ms.
-- fml_extend(key, fields, owner, ends, now, lease) moves the lease end of each of the owner's
-- values (`ends`, as fml_read read them) to now + lease where it is earlier, and keeps the
-- hash alive as long.
local function fml_expire(key, lease)
  if redis.call('pttl', key) < lease then
    redis.call('pexpire', key, lease)
  end
end

local function fml_extend(key, fields, owner, ends, now, lease)
  local flat, until_arg = {}, string.format('%d', now + lease)
  for i = 1, #fields do
    if (ends[i] or 0) < now + lease then
      flat[#flat + 1] = fml_names(fields[i], owner)
      flat[#flat + 1] = until_arg
    end
  end
  fml_set(key, flat)
  fml_expire(key, lease)
end

-- fml_foreign(key) is a WRONGTYPE error reply when `key` holds anything but a group's hash (a
-- group's hash always has an expiry), else nil and whether the key is missing.
local function fml_foreign(key)
  local kind = redis.call('type', key).ok
  if kind ~= 'none' and (kind ~= 'hash' or redis.call('pttl', key) == -1) then
    return redis.error_reply('WRONGTYPE the key holds no faster multi-lock group')
  end
  return nil, kind == 'none'
end

-- fml_bit(field) is the bit of the value in a release's wake-up mask (0..51).
local function fml_bit(field)
  local a, b = string.byte(field, 1, 2)
  return ((a or 0) * 256 + (b or 0)) % 52
end

-- fml_mask(fields) is the wake-up mask of the values `fields` (the sum of their distinct bits).
local function fml_mask(fields)
  local bits, mask = {}, 0
  for i = 1, #fields do
    local bit = fml_bit(fields[i])
    if not bits[bit] then
      bits[bit] = true
      mask = mask + 2 ^ bit
    end
  end
  return mask
end

-- fml_wake(command, channel, mask) tells the group's waiters that the values of the wake-up
-- mask `mask` (fml_mask) are free: "1" first, which wakes every Redisson waiter of the group
-- (LockPubSub's READ_UNLOCK_MESSAGE; each waits for values of its own), then [ext] 2^52 plus
-- the mask, which Redisson ignores and which wakes only the ferrisson waiters that want one of
-- those values. Returns how many subscribers the mask reached (0 when the mask is 0, nothing
-- freed, or `command` is "").
local function fml_wake(command, channel, mask)
  if command == '' or mask == 0 then
    return 0
  end
  redis.call(command, channel, '1')
  return redis.call(command, channel, string.format('%d', 2 ^ 52 + mask))
end
