-- ferrisson script
-- operation: latch/delete
-- protocol: 1
-- Delete the latch (waiters are released: a missing latch is open) and publish "1".
-- KEYS[1] the count
-- KEYS[2] channel
-- KEYS[3] participants counted this round, suffixed(name, "counted")
-- KEYS[4] the round, suffixed(name, "round") [ext]
-- ARGV[1] publish command ("publish")
-- returns 1 when something was deleted, else 0; WRONGTYPE error when the key holds someone
--         else's data (nothing deleted)
local foreign = foreign_object(KEYS[1], 'count')
if foreign then
  return foreign
end
redis.call('del', KEYS[3], KEYS[4])
if redis.call('del', KEYS[1]) == 1 then
  redis.call(ARGV[1], KEYS[2], '1')
  return 1
end
return 0
