-- ferrisson script
-- operation: latch/try_set
-- protocol: 1
-- Arm a countdown latch (Redisson RCountDownLatch layout) if it is not armed: set the count,
-- start a new round [ext], publish "1".
-- KEYS[1] the count, a STRING (missing = 0 = open)
-- KEYS[2] channel, "redisson_countdownlatch__channel__{" .. name .. "}"
-- KEYS[3] round counter, suffixed(name, "round") [ext]: waiters started in an earlier round
--         are released even when the latch is armed again before they look
-- KEYS[4] participants counted this round, suffixed(name, "counted") [ext]
-- KEYS[5] the last completed round, suffixed(name, "completed") [ext] (latch/count_down)
-- ARGV[1] the count, >= 1
-- ARGV[2] publish command ("publish")
-- ARGV[3] (optional) "new": arm even when a completed round is remembered
-- returns 1 when armed, 0 when it already was, 2 when it is open because its last round
--         completed (remembered in KEYS[5]) and ARGV[3] is not "new": a restarted coordinator
--         does not arm a barrier its workers have already passed [ext]; WRONGTYPE error when
--         the key holds someone else's data (nothing changed)
local foreign = foreign_object(KEYS[1], 'count')
if foreign then
  return foreign
end
if redis.call('exists', KEYS[1]) == 1 then
  return 0
end
local completed = redis.call('get', KEYS[5])
if completed and not string.find(completed, ':d', 1, true) and ARGV[3] ~= 'new' then
  return 2
end
redis.call('set', KEYS[1], ARGV[1])
-- A new round: the server's clock in µs (one more than the last round, if the clock lags), so
-- that the round key can go when the latch opens and a new round still differs from every
-- round a waiter may have started in.
local t = redis.call('time')
local round = math.max(tonumber(redis.call('get', KEYS[3]) or '0') + 1,
  tonumber(t[1]) * 1000000 + tonumber(t[2]))
redis.call('set', KEYS[3], string.format('%.0f', round))
redis.call('del', KEYS[4])
redis.call(ARGV[2], KEYS[2], '1')
return 1
