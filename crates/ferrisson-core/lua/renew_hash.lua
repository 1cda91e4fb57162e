-- ferrisson script
-- operation: core/renew_hash
-- protocol: 1
-- Watchdog batch renewal of hash-held locks (reentrant and fair lock): extend every lock its
-- owner still holds.
-- KEYS[i] lock hash i
-- ARGV[1] lease in milliseconds
-- ARGV[i + 1] owner of KEYS[i]
-- returns an array: 1 where the lease was extended, 0 where the owner no longer holds the lock
local renewed = {}
for i = 1, #KEYS do
  local ok = 0
  if redis.call('type', KEYS[i]).ok == 'hash' and redis.call('hexists', KEYS[i], ARGV[i + 1]) == 1 then
    redis.call('pexpire', KEYS[i], ARGV[1])
    ok = 1
  end
  renewed[i] = ok
end
return renewed
