-- ferrisson script
-- operation: latch/count_down
-- protocol: 1
-- Count down once; at zero the latch opens (deleted, "0" published). With a participant id,
-- each participant counts at most once per round [ext].
-- KEYS[1] the count
-- KEYS[2] channel
-- KEYS[3] participants counted this round, suffixed(name, "counted")
-- ARGV[1] publish command ("publish")
-- ARGV[2] participant id, or "" to count unconditionally (Redisson's countDown)
-- KEYS[4] the round, suffixed(name, "round") [ext]: deleted with the count when the latch opens
-- KEYS[5] the last completed round, suffixed(name, "completed") [ext]: set to the round (0 for
--         a latch armed without one, by Redisson) when the latch opens, for ARGV[7] ms, so
--         that a waiter that finds the latch missing tells an opening from a loss, and a
--         coordinator and its workers tell a completed round from one never armed
-- ARGV[3] the client id, 32 hex digits (its record [ext], core/record_prelude, derived from
--         KEYS[1]: a count-down resent after a lost reply gets the first call's result instead
--         of counting again, or of reporting "already counted" for its own count)
-- ARGV[4] the call's slot in the record, ARGV[5] its sequence number
-- ARGV[6] flags: "r" a resend, "e<ms>" set the record's TTL ("": none)
-- ARGV[7] how long a completed round is remembered, in milliseconds
-- returns {1 if this call counted, 0 if the participant had counted this round already, 2 if
--         there was nothing to count (with a participant: the latch is open, never armed or
--         at zero) [ext], 3 if there was nothing to count because the last round completed
--         (with a participant) [ext]; the count after}
local record = record_keys(KEYS[1], ARGV[3])
local state, done = record_state(record, ARGV[4], ARGV[5])
if state == 'ran' then
  local sep = string.find(done, '/', 1, true)
  return {tonumber(string.sub(done, 1, sep - 1)), tonumber(string.sub(done, sep + 1))}
end
local raw = redis.call('get', KEYS[1])
if raw and not tonumber(raw) then
  return redis.error_reply('WRONGTYPE the latch key does not hold a count')
end
local function result(counted, count)
  record_mark(record, ARGV[4], ARGV[5], counted .. '/' .. string.format('%.0f', count), ARGV[6])
  return {counted, count}
end
if ARGV[2] ~= '' then
  if not raw then
    -- Nothing armed: nothing to count (Redisson's countDown would leave nothing either), and
    -- the caller is told so, not answered "already counted", and whether the round completed.
    local completed = redis.call('get', KEYS[5])
    if completed and not string.find(completed, ':d', 1, true) then
      return result(3, 0)
    end
    return result(2, 0)
  end
  if redis.call('sadd', KEYS[3], ARGV[2]) == 0 then
    return result(0, tonumber(raw))
  end
end
local value = redis.call('decr', KEYS[1])
if value <= 0 then
  local round = redis.call('get', KEYS[4]) or '0'
  redis.call('del', KEYS[1], KEYS[3], KEYS[4])
  if raw then
    -- (A count-down of a latch never armed, Redisson's DECR of a missing key, completes
    -- nothing.)
    redis.call('set', KEYS[5], round, 'PX', ARGV[7])
  end
end
if value == 0 then
  redis.call(ARGV[1], KEYS[2], '0')
end
return result(1, math.max(value, 0))
