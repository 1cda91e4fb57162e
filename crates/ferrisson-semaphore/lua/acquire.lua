-- ferrisson script
-- operation: semaphore/acquire
-- protocol: 1
-- Take n permits of a semaphore (Redisson RSemaphore layout) if that many are free, leaving
-- alone the permits the oldest waiter of another call has reserved [ext]. The try is recorded
-- in the client's record (core/record_prelude), so that a resend after a lost reply takes its
-- permits once and an abandoned try can be undone; one MGET reads what the try needs.
-- KEYS[1] permit count, a STRING (missing = 0). The other keys are derived from it, in its
-- slot (core/record_prelude's tagged): each argument costs Redis about 0.2 us per call.
-- Derived: the oldest waiter's reservation [ext], suffixed(name, "intent"): "<waiter id>:<n>";
--         while it lasts, other calls may only take the permits beyond its n, so single-permit
--         callers cannot starve a waiter for many
-- Derived: the count's epoch [ext], suffixed(name, "epoch"): the server time (µs) at which an
--         acquire last restored a lost count to the limit; permits taken before it are stale
-- Derived: the client's record on the semaphore [ext] (core/record_prelude): a try undone
--         before it got here (its slot says "-<seq>:") takes nothing
-- ARGV[1] permits wanted, n >= 1
-- ARGV[2] the client id, 32 hex digits (its record)
-- ARGV[3] the try's slot in the record, ARGV[4] its sequence number
-- ARGV[5] flags: "r" a resend, "e<ms>" set the record's TTL ("": none)
-- ARGV[6] (optional) the semaphore's configured limit [ext], or "" for none: a missing count
--         (never set, or lost with Redis data) is restored to it, since no holder is known any
--         more
-- ARGV[7] (optional) how long this waiter's reservation lasts unless renewed, in milliseconds;
--         absent or "0" for a try that reserves nothing (one that will not wait, or waits for
--         one permit)
-- ARGV[8] (with ARGV[7]) waiter id (32 hex chars, one per acquire call)
-- returns the permits left (an integer, at least 0) when taken in epoch 0, else {1, permits
--         left, 0, 0, epoch} when taken; when not, {0, permits available, 1 if this
--         waiter holds the reservation else 0, ms until another waiter's reservation expires
--         (-1: none stands in the way)}; {2, 0, 0, -1} when no count is set and no limit given
local base = tagged(KEYS[1])
local intent_key, epoch_key = base .. ':intent', base .. ':epoch'
local record = record_keys(KEYS[1], ARGV[2])
local got = redis.call('mget', KEYS[1], intent_key, epoch_key)
local flags = ARGV[5]
local limit = ARGV[6] or ''
local reservation = ARGV[7] or '0'
local epoch = tonumber(got[3] or '0') or 0
-- Every copy of the call reads its slot, not only a resend: a copy left on a connection the
-- client gave up on can reach Redis after a resend ran (core/record_prelude).
local state = record_state(record, ARGV[3], ARGV[4])
if state == 'ran' then
  return {1, tonumber(got[1] or '0') or 0, 0, 0, epoch}
elseif state == 'undone' then
  -- Abandoned and undone before it got here, or a copy that ran took nothing: nobody waits
  -- for these permits.
  return {0, 0, 0, -1}
end
-- A resend that takes nothing records so: a copy of the call that reaches Redis after the
-- client moved on then takes nothing either.
local resend = flags ~= '' and string.find(flags, 'r', 1, true) ~= nil
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
elseif limit == '' then
  return {2, 0, 0, -1}
else
  -- Restored: a new epoch, so that permits taken before the loss give nothing back.
  value = tonumber(limit)
  redis.call('set', KEYS[1], limit)
  local t = redis.call('time')
  epoch = tonumber(t[1]) * 1000000 + tonumber(t[2])
  redis.call('set', epoch_key, string.format('%.0f', epoch))
end
local need = tonumber(ARGV[1])
local reserved = 0
local mine = false
local intent = got[2]
if intent then
  local sep = string.find(intent, ':', 1, true)
  if sep and string.sub(intent, 1, sep - 1) == ARGV[8] then
    mine = true
  elseif sep then
    reserved = tonumber(string.sub(intent, sep + 1)) or 0
  end
end
if value - reserved >= need then
  redis.call('decrby', KEYS[1], need)
  if mine then
    redis.call('del', intent_key)
  end
  record_mark(record, ARGV[3], ARGV[4], '', flags)
  if epoch == 0 then
    -- The hot path's reply: an integer costs Redis less than a table.
    return value - need
  end
  return {1, value - need, 0, 0, epoch}
end
if resend then
  record_mark(record, ARGV[3], ARGV[4], '-', flags)
end
if reservation ~= '0' and (mine or not intent) then
  redis.call('set', intent_key, ARGV[8] .. ':' .. need, 'PX', reservation)
  return {0, value, 1, -1}
end
local blocked = -1
if reserved > 0 and value >= need then
  -- Only the reservation stands in the way: look again when it ends, if nobody says sooner.
  blocked = redis.call('pttl', intent_key)
end
return {0, value, 0, blocked}
