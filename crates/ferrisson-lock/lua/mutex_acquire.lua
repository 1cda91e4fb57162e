-- ferrisson script
-- operation: lock/mutex_acquire
-- protocol: 1
-- Take a lean mutex ([ext], the standard Redlock layout that rslock, redsync, node-redlock and
-- redis-py's Lock share): the key holds the holder's token, here its owner.
-- KEYS[1] the mutex (a string: the holder's token)
-- ARGV[1] lease in milliseconds
-- ARGV[2] owner, the token
-- ARGV[3] (a retry only) present when this call retries one whose reply was lost
-- returns 1 when the owner now holds the mutex, {0, PTTL} when another token holds it, {-1}
--         when the owner holds it already and this is no retry (a mutex is not reentrant);
--         WRONGTYPE when the key holds no string
if redis.call('set', KEYS[1], ARGV[2], 'NX', 'PX', ARGV[1]) then
  return 1
end
local held = redis.pcall('get', KEYS[1])
if type(held) == 'table' then
  return redis.error_reply('WRONGTYPE the key holds no mutex')
end
if held == ARGV[2] then
  if not ARGV[3] then
    return {-1}
  end
  -- The lost call took it.
  redis.call('pexpire', KEYS[1], ARGV[1])
  return 1
end
return {0, redis.call('pttl', KEYS[1])}
