-- ferrisson script
-- operation: expirable_semaphore/acquire
-- protocol: 1
-- Take n permits of a permit-expirable semaphore (Redisson RPermitExpirableSemaphore layout),
-- each under its own id and lease, after returning expired permits to the count. The oldest
-- waiting call's reservation is honoured as by semaphore/acquire [ext].
-- KEYS[1] permit count. Derived from it, in its slot (core/record_prelude's tagged; each
--         argument costs Redis about 0.2 us per call): the permits taken, suffixed(name,
--         "timeout"), a ZSET of id (16 raw bytes) -> expiry ms; the channel
--         prefixed("redisson_sc", name); the oldest waiter's reservation, suffixed(name,
--         "intent") [ext]; the client's undone marks [ext] (core/record_prelude): a try undone
--         before it got here takes nothing, and neither does a copy of a resent try once the
--         resend ran (a resend marks its try). A try that took its permits needs no record: its
--         ids are its own, fresh per try, so any copy of the try (a resend, or a late first
--         send) that finds the first of them taken and unexpired knows another copy took
--         them; a resend that finds them expired takes permits anew
-- ARGV[1] permits wanted, n >= 1
-- ARGV[2] lease of each permit, in milliseconds
-- ARGV[3] publish command ("publish")
-- ARGV[4] the try's id seed, 16 raw bytes: permit i (0-based) of the try has the seed's first
--         12 bytes, then its last 4 read as a big-endian number plus i (mod 2^32) [ext], so
--         that a call's arguments (and the client's memory) do not grow with the permits asked
--         for, and a try that takes nothing makes no ids at all
-- ARGV[5] the client id, 32 hex digits (its undone marks)
-- ARGV[6] the try's sequence number in the client's record (core/record_prelude)
-- ARGV[7] flags: "r" this call resends one whose reply was lost ("": none)
-- ARGV[8] (optional) the semaphore's configured limit [ext], or "" for none: a missing count
--         (never set, or lost with Redis data) is restored to the limit less the permits still
--         held
-- ARGV[9] (optional) how long this waiter's reservation lasts unless renewed, in ms; absent or
--         "0": no reservation
-- ARGV[10] (with ARGV[9]) waiter id
-- A permit's expiry is stored as now + lease + 1: the server's clock reads whole milliseconds,
-- so `now` may lie up to a millisecond before the moment the permit was taken, and a permit
-- counts as expired once its score is <= now (Redisson's rule, kept): without the extra
-- millisecond the server could free it before its holder's deadline (send time + lease).
-- returns the count left (an integer, at least 0) when taken, {1, count, 0, 0} when another
--         copy of the try took them; when not, {0, count, 1 if this waiter holds the
--         reservation else 0, ms until something may change (a permit expires, another
--         reservation ends), -1 when nothing is known}; {2, 0, 0, -1} when no count is set and
--         no limit given; {3, total, 0, -1} when n is more than the permits there are in all
--         (free and taken), and there are some [ext]: a wait for them would never end, and
--         nothing was taken (a total of 0 or less, permits reduced below those taken, is a
--         semaphore drained for now: its acquires wait for add_permits, or find none)
local function permit_id(i)
  local first = struct.unpack('>I4', ARGV[4], 13)
  return string.sub(ARGV[4], 1, 12) .. struct.pack('>I4', (first + i) % 4294967296)
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local base = tagged(KEYS[1])
local timeouts, channel, intent_key = base .. ':timeout', 'redisson_sc:' .. base, base .. ':intent'
local limit = ARGV[8] or ''
local reservation = ARGV[9] or '0'
local _, undone = record_keys(KEYS[1], ARGV[5])
local got = redis.call('mget', KEYS[1], intent_key, undone)
-- Every copy of the try asks, the first send too (a copy left on a connection the client gave
-- up on can reach Redis after a resend ran): another copy took this try's permits, which are
-- still held under its ids.
local taken = redis.call('zscore', timeouts, permit_id(0))
if taken and tonumber(taken) > now then
  return {1, tonumber(got[1] or '0') or 0, 0, 0}
end
if was_undone(got[3], ARGV[6]) then
  -- Abandoned and undone before it got here, or a copy of a resend that ran (whose permits
  -- are not held any more: released since): nobody waits for these permits.
  return {0, 0, 0, -1}
end
if string.find(ARGV[7], 'r', 1, true) then
  -- A resend marks the try: a copy of it that reaches Redis after its permits were released
  -- takes nothing (their ids are free again then, so the check above cannot tell).
  mark_undone(undone, ARGV[6])
end
-- (A resend whose lost call's permits have expired since, a lease shorter than the retry
-- window, takes permits anew below, under the same ids: the expired ones go back to the count
-- first, so that the caller is never answered "taken" for permits that are no longer held.)
local raw_count = got[1]
if raw_count and not tonumber(raw_count) then
  return redis.error_reply('WRONGTYPE the semaphore key does not hold a permit count')
end
if not raw_count and redis.call('exists', KEYS[1]) == 1 then
  -- MGET reads a key of another type as missing.
  return redis.error_reply('WRONGTYPE the semaphore key does not hold a permit count')
end
local expired = redis.call('zremrangebyscore', timeouts, '-inf', now)
local value
if raw_count then
  value = tonumber(raw_count)
elseif limit == '' then
  return {2, 0, 0, -1}
else
  -- The expired permits are gone from the set already: the limit less the live ones is free.
  value = tonumber(limit) - redis.call('zcard', timeouts)
  redis.call('set', KEYS[1], value)
  expired = 0
end
if expired > 0 then
  value = redis.call('incrby', KEYS[1], expired)
  if value > 0 then
    redis.call(ARGV[3], channel, value)
  end
end
local need = tonumber(ARGV[1])
local reserved = 0
local mine = false
local intent = got[2]
if intent then
  local sep = string.find(intent, ':', 1, true)
  if sep and string.sub(intent, 1, sep - 1) == ARGV[10] then
    mine = true
  elseif sep then
    reserved = tonumber(string.sub(intent, sep + 1)) or 0
  end
end
if value - reserved >= need then
  redis.call('decrby', KEYS[1], need)
  local expiry = now + tonumber(ARGV[2]) + 1
  for i = 0, need - 1 do
    redis.call('zadd', timeouts, expiry, permit_id(i))
  end
  -- The count's expiry (an `expire` on the semaphore) covers the permit set too, as Redisson's
  -- acquire carries it over: the set made or grown here must not outlive the count.
  local ttl = redis.call('pttl', KEYS[1])
  if ttl > 0 then
    redis.call('pexpire', timeouts, ttl)
  end
  if mine then
    redis.call('del', intent_key)
  end
  -- The hot path's reply: an integer (the permits left) costs Redis less than a table.
  return value - need
end
-- Not taken: more than there are in all can never be (asked here only, off the path of a
-- call that takes its permits: the free ones are part of the total).
local total = value + redis.call('zcard', timeouts)
if total > 0 and need > total then
  return {3, total, 0, -1}
end
local hint = -1
local nearest = redis.call('zrange', timeouts, 0, 0, 'WITHSCORES')
if nearest[2] and tonumber(nearest[2]) < 922337203685477 then
  hint = math.max(tonumber(nearest[2]) - now, 1)
end
if reservation ~= '0' and (mine or not intent) then
  redis.call('set', intent_key, ARGV[10] .. ':' .. need, 'PX', reservation)
  return {0, value, 1, hint}
end
if reserved > 0 and value >= need then
  local ends = redis.call('pttl', intent_key)
  if hint < 0 or ends < hint then
    hint = ends
  end
end
return {0, value, 0, hint}
