-- ferrisson script
-- operation: expirable_semaphore/undo_acquire
-- protocol: 1
-- An acquire call was abandoned while in flight: if its try took permits, give them back, once
-- [ext].
-- KEYS[1] permit count
-- KEYS[2] permits taken, suffixed(name, "timeout")
-- KEYS[3] channel, prefixed("redisson_sc", name)
-- KEYS[4] the abandoned try's latch
-- ARGV[1] publish command ("publish")
-- ARGV[2] how long the latch is kept, in milliseconds (the client's retry window)
-- ARGV[3 ..] the try's permit ids, 16 raw bytes each
-- returns the number of permits given back. The try took its permits when its ids are taken
-- (see expirable_semaphore/acquire); either way the latch says "undone", so that a try that has
-- not reached Redis yet takes nothing when it does (see semaphore/undo_acquire).
redis.call('set', KEYS[4], 'undone', 'PX', ARGV[2])
local removed = 0
for i = 3, #ARGV do
  removed = removed + redis.call('zrem', KEYS[2], ARGV[i])
end
if removed > 0 then
  redis.call(ARGV[1], KEYS[3], redis.call('incrby', KEYS[1], removed))
end
return removed
