-- ferrisson script
-- operation: expirable_semaphore/undo_acquire
-- protocol: 1
-- An acquire call was abandoned while in flight: if its try took permits, give them back, once
-- [ext].
-- KEYS[1] permit count
-- KEYS[2] permits taken, suffixed(name, "timeout")
-- KEYS[3] channel, prefixed("redisson_sc", name)
-- KEYS[4] the client's undone marks on the semaphore [ext] (core/record_prelude)
-- ARGV[1] publish command ("publish")
-- ARGV[2] the try's id seed, 16 raw bytes (see expirable_semaphore/acquire)
-- ARGV[3] how many permits the try asked for
-- ARGV[4] the try's slot in the client's record (unused: the ids are the record), ARGV[5] its
--         sequence number, ARGV[6] flags ("e<ms>": how long the undone mark is kept)
-- returns the number of permits given back. The try took its permits when its ids are taken
-- (see expirable_semaphore/acquire); either way the try is marked undone, so that a try (or a
-- resend of it) that has not reached Redis yet takes nothing when it does (see
-- semaphore/undo_acquire).
local removed = 0
local prefix, base = string.sub(ARGV[2], 1, 12), struct.unpack('>I4', ARGV[2], 13)
-- The try took all of its permits or none: the first id tells.
if redis.call('zscore', KEYS[2], prefix .. struct.pack('>I4', base)) then
  for i = 0, tonumber(ARGV[3]) - 1 do
    removed = removed + redis.call('zrem', KEYS[2], prefix .. struct.pack('>I4', (base + i) % 4294967296))
  end
end
mark_undone(KEYS[4], ARGV[5], ARGV[6])
if removed > 0 then
  redis.call(ARGV[1], KEYS[3], redis.call('incrby', KEYS[1], removed))
end
return removed
