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
-- ARGV[1] publish command ("publish", "spublish")
-- ARGV[2] lease in milliseconds to set on the values still held, or "0" to leave them
-- ARGV[3] the release's slot in the record, ARGV[4] its sequence number
-- ARGV[5] flags ("" for none): "r" a resend, "e<ms>" set the record's TTL
-- ARGV[6] the wake-up mask of every value of the hold (fml_mask, which the client knows)
-- ARGV[7] the owner, ARGV[8..] the hold's fields (fml_args; its hold argument's words, each
--   an argument of its own)
-- returns a code, or {code, 0, subscribers}: -1 = the owner did not hold every value (those
--   it held are released), 0 = holds of every value remain, 1 = values were freed;
--   subscribers: the subscriber connections the wake-up reached
local done = release_recorded(KEYS[2], ARGV[3], ARGV[4])
if done then
  return done
end
local key, lease = KEYS[1], tonumber(ARGV[2])
local owner, fields = fml_args(ARGV, 7)
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
local missing, remain = false, false
local flat, gone = {}, {}
local until_ms = now + lease
local until_arg = string.format('%d', until_ms)
for i = 1, #fields do
  -- A count of '1', the usual one, is not parsed.
  local at, count = tonumber(read[2 * i - 1]), read[2 * i]
  count = count == '1' and 1 or tonumber(count) or 0
  if not (at and at >= now) then
    missing = true
  elseif count <= 1 then
    gone[#gone + 1] = i
  else
    remain = true
    flat[#flat + 1] = names[2 * i]
    flat[#flat + 1] = string.format('%d', count - 1)
    if lease > 0 and at < until_ms then
      flat[#flat + 1] = names[2 * i - 1]
      flat[#flat + 1] = until_arg
    end
  end
end
if not remain and #gone > 0 and redis.call('hlen', key) == 3 * #gone then
  -- Every field of the hash is one of these: the last values of the group go with it.
  redis.call('del', key)
else
  local names_gone = {}
  for j = 1, #gone do
    local i = gone[j]
    names_gone[3 * j - 2], names_gone[3 * j - 1], names_gone[3 * j] =
      fields[i], names[2 * i - 1], names[2 * i]
  end
  fml_del(key, names_gone)
end
-- The values freed: usually every one, whose mask the client sent.
local mask = #gone == #fields and tonumber(ARGV[6])
if not mask then
  local freed = {}
  for j = 1, #gone do
    freed[j] = fields[gone[j]]
  end
  mask = fml_mask(freed)
end
fml_set(key, flat)
if remain and lease > 0 then
  fml_expire(key, lease)
end
local code = 0
if missing then
  code = -1
elseif #gone > 0 then
  code = 1
end
release_record(KEYS[2], ARGV[3], ARGV[4], ARGV[5], code, 0)
local subscribers = fml_wake(ARGV[1], prefixed('redisson_lock__channel', key), mask)
if subscribers == 0 then
  return code
end
return {code, 0, subscribers}
