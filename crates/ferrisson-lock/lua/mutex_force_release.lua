-- ferrisson script
-- operation: lock/mutex_force_release
-- protocol: 1
-- Release a lean mutex whoever holds it, and wake one waiter.
-- KEYS[1] the mutex
-- KEYS[2] release channel
-- ARGV[1] publish command
-- returns 1 when a mutex was released, 0 when none was held; WRONGTYPE when the key holds no
--         string
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' then
  return 0
end
if kind ~= 'string' then
  return redis.error_reply('WRONGTYPE the key holds no mutex')
end
redis.call('del', KEYS[1])
redis.call(ARGV[1], KEYS[2], '0')
return 1
