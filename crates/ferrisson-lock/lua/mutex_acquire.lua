-- ferrisson script
-- operation: lock/mutex_acquire
-- protocol: 1
-- Take a lean mutex ([ext], the standard Redlock layout that rslock, redsync, node-redlock and
-- redis-py's Lock share): the key holds the holder's token, here its owner. An unfenced first try
-- is not this script but the plain command `SET key owner NX PX lease GET` (nil: taken; the
-- holder's token: held; WRONGTYPE: no string); this script serves fenced tries and retries.
-- KEYS[1] the mutex (a string: the holder's token)
-- KEYS[2] (a fenced mutex only) fencing counter, prefixed("ferrisson_mutex_token", name), issued
--         by next_token (core/lock_prelude)
-- ARGV[1] lease in milliseconds
-- ARGV[2] owner, the token
-- ARGV[3] (a retry only) present when this call retries one whose reply was lost
-- returns 1 when the owner now holds the mutex and it is not fenced, {1, 1, token} when it is
--         fenced, {0, PTTL} when another token holds it, {-1} when the owner holds it already
--         and this is no retry (a mutex is not reentrant); WRONGTYPE when the key holds no
--         string
local held = redis.pcall('get', KEYS[1])
if type(held) == 'table' then
  return redis.error_reply('WRONGTYPE the key holds no mutex')
end
if not held then
  redis.call('set', KEYS[1], ARGV[2], 'PX', ARGV[1])
  if KEYS[2] then
    return {1, 1, next_token(KEYS[2])}
  end
  return 1
end
if held == ARGV[2] then
  if not ARGV[3] then
    return {-1}
  end
  -- The lost call took it: its token is the counter's, which no acquire has moved since.
  redis.call('pexpire', KEYS[1], ARGV[1])
  if KEYS[2] then
    return {1, 1, tonumber(redis.call('get', KEYS[2]) or '0')}
  end
  return 1
end
return {0, redis.call('pttl', KEYS[1])}
