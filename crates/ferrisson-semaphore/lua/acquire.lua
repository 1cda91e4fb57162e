-- ferrisson script
-- operation: semaphore/acquire
-- protocol: 1
-- Take n permits of a semaphore (Redisson RSemaphore layout) if that many are free, leaving
-- alone the permits the oldest waiter of another call has reserved [ext].
-- KEYS[1] permit count, a STRING (missing = 0)
-- KEYS[2] the oldest waiter's reservation, suffixed(name, "intent") [ext]: "<waiter id>:<n>";
--         while it lasts, other calls may only take the permits beyond its n, so single-permit
--         callers cannot starve a waiter for many
-- KEYS[3] this call's latch, suffixed(name, "acquire:" .. waiter id .. ":" .. try) [ext]:
--         set when the try took its permits, so a retry after a lost reply does not take them
--         twice and an abandoned try can be undone; "undone" when the try was abandoned (an
--         undo that ran first leaves it, so a try that reaches Redis after its undo, as a
--         call resent with EVAL after NOSCRIPT can, takes nothing)
-- KEYS[4] the count's epoch [ext], suffixed(name, "epoch"): the server time (µs) at which an
--         acquire last restored a lost count to the limit; permits taken before it are stale
-- ARGV[1] permits wanted, n >= 1
-- ARGV[2] waiter id (32 hex chars, one per acquire call)
-- ARGV[3] how long the latch is kept, in milliseconds
-- ARGV[4] how long this waiter's reservation lasts unless renewed, in milliseconds; "0" for a
--         try that will not wait (it reserves nothing)
-- ARGV[5] the semaphore's configured limit [ext], or "" for none: a missing count (never set, or
--         lost with Redis data) is restored to it, since no holder is known any more
-- returns {1, permits left, 0, 0, epoch (0: none)} when taken; when not, {0, permits available, 1 if this
--         waiter holds the reservation else 0, ms until another waiter's reservation expires
--         (-1: none stands in the way)}; {2, 0, 0, -1} when no count is set and no limit given
local latched = redis.call('get', KEYS[3])
local function epoch()
  return tonumber(redis.call('get', KEYS[4]) or '0') or 0
end
if latched == '1' then
  return {1, tonumber(redis.call('get', KEYS[1]) or '0') or 0, 0, 0, epoch()}
end
if latched then
  -- Abandoned, and undone before it got here: nobody waits for these permits.
  return {0, 0, 0, -1}
end
local raw = redis.call('get', KEYS[1])
local value = 0
if raw then
  value = tonumber(raw)
  if not value then
    return redis.error_reply('WRONGTYPE the semaphore key does not hold a permit count')
  end
elseif ARGV[5] == '' then
  return {2, 0, 0, -1}
else
  -- Restored: a new epoch, so that permits taken before the loss give nothing back.
  value = tonumber(ARGV[5])
  redis.call('set', KEYS[1], ARGV[5])
  local t = redis.call('time')
  redis.call('set', KEYS[4], string.format('%.0f', tonumber(t[1]) * 1000000 + tonumber(t[2])))
end
local need = tonumber(ARGV[1])
local reserved = 0
local mine = false
local intent = redis.call('get', KEYS[2])
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
  redis.call('set', KEYS[3], '1', 'PX', ARGV[3])
  return {1, value - need, 0, 0, epoch()}
end
if ARGV[4] ~= '0' and (mine or not intent) then
  redis.call('set', KEYS[2], ARGV[2] .. ':' .. need, 'PX', ARGV[4])
  return {0, value, 1, -1}
end
local blocked = -1
if reserved > 0 and value >= need then
  -- Only the reservation stands in the way: look again when it ends, if nobody says sooner.
  blocked = redis.call('pttl', KEYS[2])
end
return {0, value, 0, blocked}
