-- ferrisson script
-- operation: fair_lock/leave
-- protocol: 1
-- A waiter gives up (wait limit, cancelled call): it leaves the queue at once, and if it was
-- the head of a free lock, the next waiter is woken in its place.
-- KEYS[1] lock hash
-- KEYS[2] waiter queue, prefixed("redisson_lock_queue", name)
-- KEYS[3] waiter deadlines, prefixed("redisson_lock_timeout", name)
-- KEYS[4] release channel prefix, prefixed("redisson_lock__channel", name)
-- KEYS[5] liveness deadlines of ferrisson waiters [ext], suffixed(name, "alive")
-- ARGV[1] owner
-- ARGV[2] publish command ("publish")
-- ARGV[3] the leaver's step of Redisson's arithmetic in milliseconds (fair_lock/acquire's W:
--         its try's wait, else Redisson's thread wait time): what its place in the queue added
--         to the timeouts behind it
-- returns 1 when the owner was queued, 0 when it was not
local place = redis.call('lpos', KEYS[2], ARGV[1])
local was_head = place == 0
if place then
  -- As Redisson's acquireFailed: everyone behind moves up a place, so their timeouts come a
  -- wait closer (Redisson waiters behind would otherwise count as alive a wait longer per
  -- waiter that left ahead of them). XX: a queued waiter without a timeout gets none.
  for _, waiter in ipairs(redis.call('lrange', KEYS[2], place + 1, -1)) do
    redis.call('zadd', KEYS[3], 'XX', 'INCR', -tonumber(ARGV[3]), waiter)
  end
end
redis.call('zrem', KEYS[3], ARGV[1])
redis.call('zrem', KEYS[5], ARGV[1])
local removed = redis.call('lrem', KEYS[2], 0, ARGV[1])
if was_head and redis.call('exists', KEYS[1]) == 0 then
  local head = fair_purge(KEYS[2], KEYS[3], KEYS[5], server_ms(), nil)
  if head then
    redis.call(ARGV[2], KEYS[4] .. ':' .. head, '0')
  end
end
if removed > 0 then
  return 1
end
return 0
