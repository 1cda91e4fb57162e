-- ferrisson script
-- operation: semaphore/undo_acquire
-- protocol: 1
-- An acquire call was abandoned (its caller gave up while it was in flight): if its try took
-- permits, give them back, once [ext]. A try that has not reached Redis yet (calls can arrive
-- out of order: one resent with EVAL after NOSCRIPT comes after calls sent behind it, one left
-- on a connection the client gave up on may be read after this) is marked undone, and takes
-- nothing when it does (core/record_prelude).
-- KEYS[1] permit count
-- KEYS[2] channel, prefixed("redisson_sc", name)
-- KEYS[3] the client's undone marks on the semaphore [ext]
-- KEYS[4] the client's record on the semaphore [ext]
-- ARGV[1] permits the try asked for
-- ARGV[2] publish command ("publish")
-- ARGV[3] the try's slot, ARGV[4] its sequence number, ARGV[5] the record's TTL in
--         milliseconds, ARGV[6] (optional) flags (see semaphore/acquire)
-- returns 1 when permits were given back, 0 when the try had taken none.
local state = record_state(KEYS[4], ARGV[3], ARGV[4])
if state == 'ran' then
  record_mark(KEYS[4], ARGV[3], ARGV[4], '-', ARGV[5], ARGV[6] or '')
  local value = redis.call('incrby', KEYS[1], ARGV[1])
  redis.call(ARGV[2], KEYS[2], value)
  return 1
end
if not state then
  mark_undone(KEYS[3], ARGV[4], ARGV[5])
end
return 0
