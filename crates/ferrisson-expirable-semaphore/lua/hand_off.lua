-- ferrisson script
-- operation: expirable_semaphore/hand_off
-- protocol: 1
-- [ext] Give a released permit to a waiter of the releasing client in one step: the released
-- id leaves the taken set and the waiter's new id enters it with the waiter's lease. The free
-- count does not change and nothing is published (no other waiter could have taken it). A
-- retry after a lost reply counts once with no latch: the waiter's id is new, so finding it
-- taken means the lost call handed the permit over.
-- KEYS[1] permits taken, suffixed(name, "timeout")
-- ARGV[1] id of the permit released, 16 raw bytes
-- ARGV[2] id of the waiter's permit, 16 raw bytes
-- ARGV[3] the waiter's lease in milliseconds
-- ARGV[4] "1" when this call retries one whose reply was lost, else "0"
-- returns 1 when handed over, 0 when the released permit is not held (unknown, released or
--         expired; nothing changed)
if ARGV[4] == '1' and redis.call('zscore', KEYS[1], ARGV[2]) then
  return 1
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expiry = redis.call('zscore', KEYS[1], ARGV[1])
if expiry and tonumber(expiry) > now then
  redis.call('zrem', KEYS[1], ARGV[1])
  -- + 1: the end of the server's current millisecond (see expirable_semaphore/acquire).
  redis.call('zadd', KEYS[1], now + tonumber(ARGV[3]) + 1, ARGV[2])
  return 1
end
return 0
