-- ferrisson script
-- operation: semaphore/acquire
-- protocol: 1
-- Take n permits of a semaphore (Redisson RSemaphore layout) if that many are free, leaving
-- alone the permits the oldest waiter of another call has reserved [ext]. The try is recorded
-- in the client's record (core/record_prelude), so that a resend after a lost reply takes its
-- permits once and an abandoned try can be undone; one MGET reads what the try needs.
-- KEYS[1] permit count, a STRING (missing = 0)
-- KEYS[2] the oldest waiter's reservation, suffixed(name, "intent") [ext]: "<waiter id>:<n>";
--         while it lasts, other calls may only take the permits beyond its n, so single-permit
--         callers cannot starve a waiter for many
-- KEYS[3] the count's epoch [ext], suffixed(name, "epoch"): the server time (µs) at which an
--         acquire last restored a lost count to the limit; permits taken before it are stale
-- KEYS[4] the client's undone marks on the semaphore [ext] (core/record_prelude): a try undone
--         before it got here takes nothing
-- KEYS[5] the client's record on the semaphore [ext] (core/record_prelude)
-- ARGV[1] permits wanted, n >= 1
-- ARGV[2] waiter id (32 hex chars, one per acquire call)
-- ARGV[3] how long this waiter's reservation lasts unless renewed, in milliseconds; "0" for a
--         try that will not wait (it reserves nothing)
-- ARGV[4] the semaphore's configured limit [ext], or "" for none: a missing count (never set, or
--         lost with Redis data) is restored to it, since no holder is known any more
-- ARGV[5] the try's slot in the record, ARGV[6] its sequence number, ARGV[7] the record's TTL
--         in milliseconds, ARGV[8] (optional) flags: "r" a resend, "e" set the record's TTL
-- returns {1, permits left, 0, 0, epoch (0: none)} when taken; when not, {0, permits available, 1 if this
--         waiter holds the reservation else 0, ms until another waiter's reservation expires
--         (-1: none stands in the way)}; {2, 0, 0, -1} when no count is set and no limit given
local got = redis.call('mget', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
local flags = ARGV[8] or ''
local epoch = tonumber(got[3] or '0') or 0
if was_undone(got[4], ARGV[6]) then
  -- Abandoned, and undone before it got here: nobody waits for these permits.
  return {0, 0, 0, -1}
end
if flags ~= '' and string.find(flags, 'r', 1, true) then
  local state = record_state(KEYS[5], ARGV[5], ARGV[6])
  if state == 'ran' then
    return {1, tonumber(got[1] or '0') or 0, 0, 0, epoch}
  elseif state == 'undone' then
    return {0, 0, 0, -1}
  end
end
local raw = got[1]
local value = 0
if raw then
  value = tonumber(raw)
  if not value then
    return redis.error_reply('WRONGTYPE the semaphore key does not hold a permit count')
  end
elseif redis.call('exists', KEYS[1]) == 1 then
  -- MGET reads a key of another type as missing.
  return redis.error_reply('WRONGTYPE the semaphore key does not hold a permit count')
elseif ARGV[4] == '' then
  return {2, 0, 0, -1}
else
  -- Restored: a new epoch, so that permits taken before the loss give nothing back.
  value = tonumber(ARGV[4])
  redis.call('set', KEYS[1], ARGV[4])
  local t = redis.call('time')
  epoch = tonumber(t[1]) * 1000000 + tonumber(t[2])
  redis.call('set', KEYS[3], string.format('%.0f', epoch))
end
local need = tonumber(ARGV[1])
local reserved = 0
local mine = false
local intent = got[2]
if intent then
  local sep = string.find(intent, ':', 1, true)
  if sep and string.sub(intent, 1, sep - 1) == ARGV[2] then
    mine = true
  elseif sep then
    reserved = tonumber(string.sub(intent, sep + 1)) or 0
  end
end
if value - reserved >= need then
  redis.call('decrby', KEYS[1], need)
  if mine then
    redis.call('del', KEYS[2])
  end
  record_mark(KEYS[5], ARGV[5], ARGV[6], '', ARGV[7], flags)
  return {1, value - need, 0, 0, epoch}
end
if ARGV[3] ~= '0' and (mine or not intent) then
  redis.call('set', KEYS[2], ARGV[2] .. ':' .. need, 'PX', ARGV[3])
  return {0, value, 1, -1}
end
local blocked = -1
if reserved > 0 and value >= need then
  -- Only the reservation stands in the way: look again when it ends, if nobody says sooner.
  blocked = redis.call('pttl', KEYS[2])
end
return {0, value, 0, blocked}
