-- ferrisson script
-- operation: lock/mutex_renew
-- protocol: 1
-- Watchdog batch renewal of lean mutexes: extend every mutex its owner's token still holds.
-- KEYS[i] mutex i
-- ARGV[1] lease in milliseconds
-- ARGV[i + 1] owner (the token) of KEYS[i]
-- returns an array: 1 where the lease was extended, 0 where the token no longer holds the mutex
local renewed = {}
for i = 1, #KEYS do
  local ok = 0
  if redis.call('type', KEYS[i]).ok == 'string' and redis.call('get', KEYS[i]) == ARGV[i + 1] then
    redis.call('pexpire', KEYS[i], ARGV[1])
    ok = 1
  end
  renewed[i] = ok
end
return renewed
