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
-- ARGV[3] the try's id seed, 16 raw bytes (see expirable_semaphore/acquire)
-- ARGV[4] how many permits the try asked for
-- returns the number of permits given back. The try took its permits when its ids are taken
-- (see expirable_semaphore/acquire); either way the latch says "undone", so that a try that has
-- not reached Redis yet takes nothing when it does (see semaphore/undo_acquire).
redis.call('set', KEYS[4], 'undone', 'PX', ARGV[2])
local removed = 0
local prefix, base = string.sub(ARGV[3], 1, 12), struct.unpack('>I4', ARGV[3], 13)
-- The try took all of its permits or none: the first id tells.
if redis.call('zscore', KEYS[2], prefix .. struct.pack('>I4', base)) then
  for i = 0, tonumber(ARGV[4]) - 1 do
    removed = removed + redis.call('zrem', KEYS[2], prefix .. struct.pack('>I4', (base + i) % 4294967296))
  end
end
if removed > 0 then
  redis.call(ARGV[1], KEYS[3], redis.call('incrby', KEYS[1], removed))
end
return removed
