-- ferrisson script
-- operation: semaphore/release
-- protocol: 1
-- Give n permits back and publish the new count; the release is recorded in the client's
-- record (core/record_prelude), so that a resend after a lost reply gives them back once.
-- KEYS[1] permit count. Derived from it, in its slot (each argument costs Redis about 0.2 us
--         per call): the channel prefixed("redisson_sc", name), the count's epoch [ext] (see
--         semaphore/acquire) and the client's record [ext]
-- ARGV[1] permits, n >= 1
-- ARGV[2] publish command ("publish")
-- ARGV[3] the client id, 32 hex digits (its record)
-- ARGV[4] the release's slot in the record, ARGV[5] its sequence number
-- ARGV[6] flags: "r" a resend, "e<ms>" set the record's TTL ("": none)
-- ARGV[7] (optional) the semaphore's configured limit [ext], or "" for none: the count never
--         grows above it (after a count restored to the limit, holders from before the loss
--         give back permits the restore already counted)
-- ARGV[8] (optional) the epoch the permits were taken in [ext] ("0", the default: before any),
--         or "" for a release of permits of unknown origin (Redisson's release,
--         Semaphore::release): permits of an older epoch were given back by the restore
--         already, so releasing them changes nothing. The epoch is read only when a limit is
--         given or the permits' epoch is not "0" (a restore needs a limit, and every handle of
--         a semaphore should give the same one)
-- ARGV[9] (optional) "1" to release only when a count is set (Redisson's releaseIfExists)
-- returns the count after the release; nil when ARGV[9] is "1" and no count is set (nothing
--         changed)
local base = tagged(KEYS[1])
local record = record_keys(KEYS[1], ARGV[3])
local flags = ARGV[6]
local limit = ARGV[7] or ''
local epoch = ARGV[8] or '0'
-- Every copy of the release reads its slot, not only a resend: a copy left on a connection the
-- client gave up on can reach Redis after a resend ran, and would give the permits back twice.
local state, result = record_state(record, ARGV[4], ARGV[5])
if state == 'ran' then
  if result == '' then
    return nil
  end
  return tonumber(result)
end
local function wrong()
  return redis.error_reply('WRONGTYPE the semaphore key does not hold a permit count')
end
if ARGV[9] == '1' and not redis.call('get', KEYS[1]) then
  record_mark(record, ARGV[4], ARGV[5], '', flags)
  return nil
end
if epoch ~= '' and (limit ~= '' or epoch ~= '0')
    and tonumber(redis.call('get', base .. ':epoch') or '0') ~= tonumber(epoch) then
  local count = redis.pcall('get', KEYS[1])
  if type(count) == 'table' or (count and not tonumber(count)) then
    return wrong()
  end
  count = tonumber(count or '0')
  record_mark(record, ARGV[4], ARGV[5], count, flags)
  return count
end
local value = redis.pcall('incrby', KEYS[1], ARGV[1])
if type(value) == 'table' then
  -- A key of another type, or a string that is no count: nothing changed.
  return wrong()
end
if limit ~= '' and value > tonumber(limit) then
  value = tonumber(limit)
  redis.call('set', KEYS[1], limit)
end
redis.call(ARGV[2], 'redisson_sc:' .. base, value)
record_mark(record, ARGV[4], ARGV[5], value, flags)
return value
