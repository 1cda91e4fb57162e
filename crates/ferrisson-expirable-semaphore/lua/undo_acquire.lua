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
-- ARGV[2] how long the latch is kept, in milliseconds (the acquire's)
-- ARGV[3 ..] the try's permit ids, 16 raw bytes each
-- returns the number of permits given back. A try that has not reached Redis yet finds its
-- latch "undone" and takes nothing (see semaphore/undo_acquire).
local latched = redis.call('get', KEYS[4])
if latched ~= '1' then
  if not latched then
    redis.call('set', KEYS[4], 'undone', 'PX', ARGV[2])
  end
  return 0
end
redis.call('set', KEYS[4], 'undone', 'KEEPTTL')
local removed = 0
for i = 3, #ARGV do
  removed = removed + redis.call('zrem', KEYS[2], ARGV[i])
end
if removed > 0 then
  redis.call(ARGV[1], KEYS[3], redis.call('incrby', KEYS[1], removed))
end
return removed
