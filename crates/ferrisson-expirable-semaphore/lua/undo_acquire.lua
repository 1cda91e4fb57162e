-- ferrisson script
-- operation: expirable_semaphore/undo_acquire
-- protocol: 1
-- An acquire call was abandoned while in flight: if its try took permits, give them back, once
-- [ext].
-- KEYS[1] permit count. Derived from it, in its slot: the permits taken, suffixed(name,
--         "timeout"); the channel prefixed("redisson_sc", name); the client's undone marks
--         [ext] (core/record_prelude)
-- ARGV[1] publish command ("publish")
-- ARGV[2] the try's id seed, 16 raw bytes (see expirable_semaphore/acquire)
-- ARGV[3] how many permits the try asked for
-- ARGV[4] the client id, 32 hex digits
-- ARGV[5] the try's slot in the client's record (unused: the ids are the record), ARGV[6] its
--         sequence number, ARGV[7] flags ("e<ms>": how long the undone mark is kept)
-- returns the number of permits given back. The try took its permits when its ids are taken
-- (see expirable_semaphore/acquire); either way the try is marked undone, so that a try (or a
-- resend of it) that has not reached Redis yet takes nothing when it does (see
-- semaphore/undo_acquire).
local timeouts = tagged(KEYS[1]) .. ':timeout'
local _, undone = record_keys(KEYS[1], ARGV[4])
local removed = 0
local prefix, first = string.sub(ARGV[2], 1, 12), struct.unpack('>I4', ARGV[2], 13)
-- The try took all of its permits or none: the first id tells.
if redis.call('zscore', timeouts, prefix .. struct.pack('>I4', first)) then
  for i = 0, tonumber(ARGV[3]) - 1 do
    removed = removed + redis.call('zrem', timeouts, prefix .. struct.pack('>I4', (first + i) % 4294967296))
  end
end
mark_undone(undone, ARGV[6], record_ttl(ARGV[7]))
if removed > 0 then
  redis.call(ARGV[1], 'redisson_sc:' .. tagged(KEYS[1]), redis.call('incrby', KEYS[1], removed))
end
return removed
