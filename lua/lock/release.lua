-- ferrisson script
-- operation: lock/release
-- protocol: 1
-- Release one hold of a reentrant lock; a retry with the same request id gets the first result.
-- KEYS[1] lock hash
-- KEYS[2] release channel, prefixed("redisson_lock__channel", name)
-- KEYS[3] unlock latch, prefixed("redisson_unlock_latch", name) .. ":" .. request id
-- ARGV[1] lease in milliseconds to set while holds remain, or "0" to leave the TTL alone
-- ARGV[2] owner
-- ARGV[3] how long the latch keeps the result, in milliseconds
-- ARGV[4] publish command ("publish")
-- returns nil when the owner holds nothing, 0 when holds remain, 1 when the lock was released
local done = redis.call('get', KEYS[3])
if done then
  return tonumber(done)
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return nil
end
local result
if redis.call('hincrby', KEYS[1], ARGV[2], -1) > 0 then
  if ARGV[1] ~= '0' then
    redis.call('pexpire', KEYS[1], ARGV[1])
  end
  result = 0
else
  redis.call('del', KEYS[1])
  redis.call(ARGV[4], KEYS[2], '0')
  result = 1
end
redis.call('set', KEYS[3], result, 'px', ARGV[3])
return result
