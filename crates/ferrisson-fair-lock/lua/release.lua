-- ferrisson script
-- operation: fair_lock/release
-- protocol: 1
-- Release one hold of a fair lock; when the last goes, free it and wake the head waiter alone
-- (on its own channel). A retry with the same request id gets the first result.
-- KEYS[1] lock hash
-- KEYS[2] waiter queue, prefixed("redisson_lock_queue", name)
-- KEYS[3] release channel prefix, prefixed("redisson_lock__channel", name)
-- KEYS[4] unlock latch, prefixed("redisson_unlock_latch", name) .. ":" .. request id
-- KEYS[5] waiter timeouts, prefixed("redisson_lock_timeout", name)
-- KEYS[6] liveness deadlines of ferrisson waiters [ext], suffixed(name, "alive")
-- ARGV[1] lease in milliseconds to set while holds remain, or "0" to leave the TTL alone
-- ARGV[2] owner
-- ARGV[3] how long the latch keeps the result, in milliseconds
-- ARGV[4] publish command ("publish")
-- returns -1 = the owner holds nothing, 0 = holds remain, 1 = released (the first live waiter
--         woken: dead ones at the head are dropped first, as Redisson's unlock does; and "0"
--         published on KEYS[3] itself [ext], for the lock's watchers, Lock::wait_unlocked: a
--         fair lock's waiters, Redisson's and ours, each listen on their own channel)
local done = redis.call('get', KEYS[4])
if done then
  return tonumber(done)
end
local code = -1
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  if redis.call('hincrby', KEYS[1], ARGV[2], -1) > 0 then
    if ARGV[1] ~= '0' then
      redis.call('pexpire', KEYS[1], ARGV[1])
    end
    code = 0
  else
    redis.call('del', KEYS[1])
    local head = fair_purge(KEYS[2], KEYS[5], KEYS[6], server_ms(), nil)
    if head then
      redis.call(ARGV[4], KEYS[3] .. ':' .. head, '0')
    end
    redis.call(ARGV[4], KEYS[3], '0')
    code = 1
  end
end
redis.call('set', KEYS[4], code, 'PX', ARGV[3])
return code
