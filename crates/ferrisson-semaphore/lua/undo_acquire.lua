-- ferrisson script
-- operation: semaphore/undo_acquire
-- protocol: 1
-- An acquire call was abandoned (its caller gave up while it was in flight): if its try took
-- permits, give them back, once [ext]. A try that has not reached Redis yet (calls can arrive
-- out of order: one resent with EVAL after NOSCRIPT comes after calls sent behind it, one left
-- on a connection the client gave up on may be read after this) is marked undone in its slot
-- of the client's record ("-<seq>:"), and takes nothing when it does (core/record_prelude).
-- KEYS[1] permit count. Derived from it, in its slot: the channel prefixed("redisson_sc",
--         name), the client's record [ext]
-- ARGV[1] permits the try asked for
-- ARGV[2] publish command ("publish")
-- ARGV[3] the client id, 32 hex digits
-- ARGV[4] the try's slot, ARGV[5] its sequence number, ARGV[6] flags ("e<ms>": the TTL of the
--         record)
-- returns 1 when permits were given back, 0 when the try had taken none.
local record = record_keys(KEYS[1], ARGV[3])
local state = record_state(record, ARGV[4], ARGV[5])
if state == 'ran' then
  record_mark(record, ARGV[4], ARGV[5], '-', ARGV[6])
  local value = redis.call('incrby', KEYS[1], ARGV[1])
  redis.call(ARGV[2], 'redisson_sc:' .. tagged(KEYS[1]), value)
  return 1
end
if not state then
  record_mark(record, ARGV[4], ARGV[5], '-', ARGV[6])
end
return 0
