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
-- returns 1 when the owner was queued, 0 when it was not
local was_head = redis.call('lindex', KEYS[2], 0) == ARGV[1]
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
