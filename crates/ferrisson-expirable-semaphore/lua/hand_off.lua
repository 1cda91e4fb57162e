-- ferrisson script
-- operation: expirable_semaphore/hand_off
-- protocol: 1
-- [ext] Give a released permit to a waiter of the releasing client in one step: the released
-- id leaves the taken set and the waiter's new id enters it with the waiter's lease. The free
-- count does not change and nothing is published (no other waiter could have taken it). A
-- retry with the same request id gets the first result.
-- KEYS[1] permits taken, suffixed(name, "timeout")
-- KEYS[2] release latch, prefixed("redisson_unlock_latch", name) .. ":" .. request id
-- ARGV[1] id of the permit released, 32 hex chars
-- ARGV[2] id of the waiter's permit, 32 hex chars
-- ARGV[3] the waiter's lease in milliseconds
-- ARGV[4] how long the latch is kept, in milliseconds
-- returns 1 when handed over, 0 when the released permit is not held (unknown, released or
--         expired; nothing changed)
local function raw(hex)
  return (string.gsub(hex, '..', function(pair) return string.char(tonumber(pair, 16)) end))
end
local latched = redis.call('get', KEYS[2])
if latched then
  return tonumber(latched)
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local released = raw(ARGV[1])
local expiry = redis.call('zscore', KEYS[1], released)
local result = 0
if expiry and tonumber(expiry) > now then
  redis.call('zrem', KEYS[1], released)
  redis.call('zadd', KEYS[1], now + tonumber(ARGV[3]), raw(ARGV[2]))
  result = 1
end
redis.call('set', KEYS[2], result, 'PX', ARGV[4])
return result
