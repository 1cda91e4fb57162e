-- ferrisson script
-- operation: latch/delete
-- protocol: 1
-- Delete the latch (waiters are released: a missing latch is open) and publish "1".
-- KEYS[1] the count
-- KEYS[2] channel
-- KEYS[3] participants counted this round, suffixed(name, "counted")
-- KEYS[4] the round, suffixed(name, "round") [ext]
-- KEYS[5] the last ended round, suffixed(name, "completed") [ext]: set to "<round>:d" when
--         there was a count, so that its waiters read the delete as an opening, not a loss;
--         a later try_set arms it as a latch never armed
-- ARGV[1] publish command ("publish")
-- ARGV[2] how long the marker lasts, in milliseconds
-- returns 1 when something was deleted, else 0; WRONGTYPE error when the key holds someone
--         else's data (nothing deleted)
local foreign = foreign_object(KEYS[1], 'count')
if foreign then
  return foreign
end
local round = redis.call('get', KEYS[4]) or '0'
redis.call('del', KEYS[3], KEYS[4])
if redis.call('del', KEYS[1]) == 1 then
  redis.call('set', KEYS[5], round .. ':d', 'PX', ARGV[2])
  redis.call(ARGV[1], KEYS[2], '1')
  return 1
end
redis.call('del', KEYS[5])
return 0
