-- ferrisson script
-- operation: semaphore/release
-- protocol: 1
-- Give n permits back and publish the new count; the release is recorded in the client's
-- record (core/record_prelude), so that a resend after a lost reply gives them back once.
-- KEYS[1] permit count
-- KEYS[2] channel, prefixed("redisson_sc", name)
-- KEYS[3] the count's epoch [ext] (see semaphore/acquire)
-- KEYS[4] the client's record on the semaphore [ext]
-- ARGV[1] permits, n >= 1
-- ARGV[2] publish command ("publish")
-- ARGV[3] the semaphore's configured limit [ext], or "" for none: the count never grows above
--         it (after a count restored to the limit, holders from before the loss give back
--         permits the restore already counted)
-- ARGV[4] the epoch the permits were taken in [ext] ("0": before any), or "" for a release of
--         permits of unknown origin (Redisson's release, Semaphore::release): permits of an older
--         epoch were given back by the restore already, so releasing them changes nothing. The
--         epoch is read only when a limit is given or the permits' epoch is not "0" (a restore
--         needs a limit, and every handle of a semaphore should give the same one)
-- ARGV[5] "1" to release only when a count is set (Redisson's releaseIfExists), else "0"
-- ARGV[6] the release's slot in the record, ARGV[7] its sequence number, ARGV[8] the record's
--         TTL in milliseconds, ARGV[9] (optional) flags: "r" a resend, "e" set the record's TTL
-- returns the count after the release; nil when ARGV[5] is "1" and no count is set (nothing
--         changed)
local flags = ARGV[9] or ''
if flags ~= '' and string.find(flags, 'r', 1, true) then
  local state, result = record_state(KEYS[4], ARGV[6], ARGV[7])
  if state == 'ran' then
    if result == '' then
      return nil
    end
    return tonumber(result)
  end
end
local function wrong()
  return redis.error_reply('WRONGTYPE the semaphore key does not hold a permit count')
end
if ARGV[5] == '1' then
  local raw = redis.call('get', KEYS[1])
  if not raw then
    record_mark(KEYS[4], ARGV[6], ARGV[7], '', ARGV[8], flags)
    return nil
  end
end
if ARGV[4] ~= '' and (ARGV[3] ~= '' or ARGV[4] ~= '0')
    and tonumber(redis.call('get', KEYS[3]) or '0') ~= tonumber(ARGV[4]) then
  local count = redis.pcall('get', KEYS[1])
  if type(count) == 'table' or (count and not tonumber(count)) then
    return wrong()
  end
  count = tonumber(count or '0')
  record_mark(KEYS[4], ARGV[6], ARGV[7], count, ARGV[8], flags)
  return count
end
local value = redis.pcall('incrby', KEYS[1], ARGV[1])
if type(value) == 'table' then
  -- A key of another type, or a string that is no count: nothing changed.
  return wrong()
end
if ARGV[3] ~= '' and value > tonumber(ARGV[3]) then
  value = tonumber(ARGV[3])
  redis.call('set', KEYS[1], ARGV[3])
end
redis.call(ARGV[2], KEYS[2], value)
record_mark(KEYS[4], ARGV[6], ARGV[7], value, ARGV[8], flags)
return value
