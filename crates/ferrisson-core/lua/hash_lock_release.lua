-- ferrisson script
-- operation: core/hash_lock_release
-- protocol: 1
-- Release one hold of a lock kept in a hash (the reentrant lock's and the spin lock's), freeing
-- it (and waking a waiter) or handing it to a waiter of the releasing client; a retry with the
-- same request id gets the first result.
-- KEYS[1] lock hash
-- KEYS[2] release channel, prefixed("redisson_lock__channel", name)
-- KEYS[3] unlock latch, prefixed("redisson_unlock_latch", name) .. ":" .. request id
-- KEYS[4] fencing counter, prefixed("redisson_lock_token", name), issued by next_token (core/lock_prelude); touched only for a fenced hand-off
-- ARGV[1] lease in milliseconds to set while holds remain, or "0" to leave the TTL alone
-- ARGV[2] owner
-- ARGV[3] how long the latch keeps the result, in milliseconds
-- ARGV[4] publish command ("publish", "spublish"), or "" to publish nothing (the spin lock,
--         whose waiters poll, as Redisson's RSpinLock)
-- ARGV[5] successor owner to hand the lock to when the last hold goes, or "" to free it
-- ARGV[6] the successor's lease in milliseconds
-- ARGV[7] "1" for a fenced lock, else "0"
-- returns {code, token, subscribers}: code -1 = the owner holds nothing, 0 = holds remain,
--         1 = released (and "0" published), 2 = handed to the successor; token = the
--         successor's fencing token on a fenced hand-off, else 0; subscribers = how many
--         subscriber connections the release message reached (its waiters' clients: the
--         releasing client's turns between clients, docs/architecture.md), else 0. A retry
--         answered from the latch gets {code, token}.
local done = redis.call('get', KEYS[3])
if done then
  local sep = string.find(done, ':', 1, true)
  return {tonumber(string.sub(done, 1, sep - 1)), tonumber(string.sub(done, sep + 1))}
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return {-1, 0}
end
local code = 0
local token = 0
local subscribers = 0
if redis.call('hincrby', KEYS[1], ARGV[2], -1) > 0 then
  if ARGV[1] ~= '0' then
    redis.call('pexpire', KEYS[1], ARGV[1])
  end
elseif ARGV[5] ~= '' then
  redis.call('hdel', KEYS[1], ARGV[2])
  redis.call('hincrby', KEYS[1], ARGV[5], 1)
  redis.call('pexpire', KEYS[1], ARGV[6])
  if ARGV[7] == '1' then
    token = next_token(KEYS[4])
  end
  code = 2
else
  redis.call('del', KEYS[1])
  if ARGV[4] ~= '' then
    subscribers = redis.call(ARGV[4], KEYS[2], '0')
  end
  code = 1
end
redis.call('set', KEYS[3], code .. ':' .. token, 'px', ARGV[3])
return {code, token, subscribers}
