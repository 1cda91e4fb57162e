-- ferrisson script
-- operation: semaphore/undo_acquire
-- protocol: 1
-- An acquire call was abandoned (its caller gave up while it was in flight): if its try took
-- permits, give them back, once [ext].
-- KEYS[1] permit count
-- KEYS[2] channel, prefixed("redisson_sc", name)
-- KEYS[3] the abandoned try's latch (see semaphore/acquire)
-- ARGV[1] permits the try asked for
-- ARGV[2] publish command ("publish")
-- ARGV[3] how long the latch is kept, in milliseconds (the acquire's)
-- returns 1 when permits were given back, 0 when the try had taken none. A try that has not
-- reached Redis yet (calls can arrive out of order: one resent with EVAL after NOSCRIPT comes
-- after calls sent behind it) finds its latch "undone" and takes nothing.
local latched = redis.call('get', KEYS[3])
if latched ~= '1' then
  if not latched then
    redis.call('set', KEYS[3], 'undone', 'PX', ARGV[3])
  end
  return 0
end
redis.call('set', KEYS[3], 'undone', 'KEEPTTL')
local value = redis.call('incrby', KEYS[1], ARGV[1])
redis.call(ARGV[2], KEYS[2], value)
return 1
