-- ferrisson script
-- operation: core/permits_leave
-- protocol: 1
-- A waiter gives up (wait limit, cancelled call): its reservation, if it holds it, goes at
-- once, and the count is published so that other waiters try again [ext].
-- KEYS[1] permit count
-- KEYS[2] channel, prefixed("redisson_sc", name)
-- KEYS[3] the reservation, suffixed(name, "intent")
-- ARGV[1] waiter id
-- ARGV[2] publish command ("publish")
-- returns 1 when the waiter's reservation was removed, else 0
local intent = redis.call('get', KEYS[3])
if intent and string.sub(intent, 1, string.len(ARGV[1]) + 1) == ARGV[1] .. ':' then
  redis.call('del', KEYS[3])
  redis.call(ARGV[2], KEYS[2], tonumber(redis.call('get', KEYS[1]) or '0') or 0)
  return 1
end
return 0
