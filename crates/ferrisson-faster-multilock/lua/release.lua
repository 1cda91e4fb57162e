-- ferrisson script
-- operation: faster_multilock/release
-- protocol: 1
-- Release one hold of each value of a hold (Redisson's RFasterMultiLock unlockInner): a value
-- whose lock_count drops to 0 is deleted, and the group's waiters are told which values are
-- free (fml_wake). What the owner no longer holds is left alone; the call then says the owner
-- did not hold everything, as Redisson's unlock does. A resend after a lost reply counts once
-- (core/release_prelude).
-- KEYS[1] the group hash
-- KEYS[2] the client's record on the group [ext] (core/record_prelude)
-- ARGV[1] the hold, "<owner> <field> <field> ..." (faster_multilock/prelude)
-- ARGV[2] publish command ("publish", "spublish")
-- ARGV[3] lease in milliseconds to set on the values still held, or "0" to leave them
-- ARGV[4] the release's slot in the record, ARGV[5] its sequence number
-- ARGV[6] (optional) flags: "r" a resend, "e<ms>" set the record's TTL
-- returns a code, or {code, 0, subscribers}: -1 = the owner did not hold every value (those
--   it held are released), 0 = holds of every value remain, 1 = values were freed;
--   subscribers: the subscriber connections the wake-up reached
local done = release_recorded(KEYS[2], ARGV[4], ARGV[5])
if done then
  return done
end
local key, lease = KEYS[1], tonumber(ARGV[3])
local owner, fields = fml_hold(ARGV[1])
local now = fml_now()
-- As Redisson's unlock, the owner's own lease end says whether it holds a value (a value taken
-- over had its last holder's lease run out; the acquire deletes that holder's fields): one
-- HMGET of the owner's lease ends and counts, not of the holders first.
local names = {}
local end_suffix, count_suffix = ':' .. owner .. ':expire_time', ':' .. owner .. ':lock_count'
for i = 1, #fields do
  names[2 * i - 1], names[2 * i] = fields[i] .. end_suffix, fields[i] .. count_suffix
end
local read = fml_get(key, names)
local missing, freed, remain = false, {}, false
local flat, gone = {}, {}
local until_ms = now + lease
for i = 1, #fields do
  local field, at, count = fields[i], tonumber(read[2 * i - 1]), tonumber(read[2 * i]) or 0
  if not (at and at >= now) then
    missing = true
  elseif count <= 1 then
    local n = #gone
    gone[n + 1] = field
    gone[n + 2] = names[2 * i - 1]
    gone[n + 3] = names[2 * i]
    freed[fml_bit(field)] = true
  else
    remain = true
    flat[#flat + 1] = names[2 * i]
    flat[#flat + 1] = count - 1
    if lease > 0 and at < until_ms then
      flat[#flat + 1] = names[2 * i - 1]
      flat[#flat + 1] = string.format('%d', until_ms)
    end
  end
end
if not remain and #gone > 0 and redis.call('hlen', key) == #gone then
  -- Every field of the hash is one of these: the last values of the group go with it.
  redis.call('del', key)
else
  fml_del(key, gone)
end
fml_set(key, flat)
if remain and lease > 0 then
  fml_expire(key, lease)
end
local code = 0
if missing then
  code = -1
elseif next(freed) ~= nil then
  code = 1
end
release_record(KEYS[2], ARGV[4], ARGV[5], ARGV[6] or '', code, 0)
local subscribers = fml_wake(ARGV[2], prefixed('redisson_lock__channel', key), freed)
if subscribers == 0 then
  return code
end
return {code, 0, subscribers}
