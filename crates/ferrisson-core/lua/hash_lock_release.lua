-- ferrisson script
-- operation: core/hash_lock_release
-- protocol: 1
-- Release one hold of a lock kept in a hash (the reentrant lock's and the spin lock's), freeing
-- it (and waking a waiter) or handing it to a waiter of the releasing client. A retry after a
-- lost reply counts once. A release that leaves holds or hands off records its result in its
-- own unlock latch (KEYS[3], one per request); a release that frees the lock, the hot path,
-- records only its sequence number in the client's latch for this lock (KEYS[5], one key per
-- client and lock, overwritten: a fresh key per release, created and expired, was most of what
-- Redis spent on a lock + unlock), unless the client says another of its releases of this lock
-- may still be resent (ARGV[10]): then it latches per request too, so as not to overwrite that
-- one's record. docs/protocol.md, "[ext] Retries".
-- KEYS[1] lock hash
-- KEYS[2] release channel, prefixed("redisson_lock__channel", name)
-- KEYS[3] unlock latch, prefixed("redisson_unlock_latch", name) .. ":" .. request id
-- KEYS[4] fencing counter, prefixed("redisson_lock_token", name), issued by next_token (core/lock_prelude); touched only for a fenced hand-off
-- KEYS[5] the client's unlock latch, prefixed("redisson_unlock_latch", name) .. ":" .. the client id in 32 hex digits
-- ARGV[1] lease in milliseconds to set while holds remain, or "0" to leave the TTL alone
-- ARGV[2] owner
-- ARGV[3] how long latches keep a result, in milliseconds
-- ARGV[4] publish command ("publish", "spublish"), or "" to publish nothing (the spin lock,
--         whose waiters poll, as Redisson's RSpinLock)
-- ARGV[5] successor owner to hand the lock to when the last hold goes, or "" to free it
-- ARGV[6] the successor's lease in milliseconds
-- ARGV[7] "1" for a fenced lock, else "0"
-- ARGV[8] "1" when this call retries one whose reply was lost (the same request), else "0"
-- ARGV[9] the release's sequence number: a decimal integer, larger for each release the
--         client starts
-- ARGV[10] "1" to record a free in KEYS[3] rather than KEYS[5], else "0"
-- returns a code, or {code, token, subscribers}: code -1 = the owner holds nothing, 0 = holds
--         remain, 1 = released (and "0" published), 2 = handed to the successor, -2 = (a retry
--         only) the owner holds nothing and a later free of this lock by the same client
--         overwrote what the lost call recorded (the client's ARGV[10] rules it out): the
--         script cannot tell a free from a hold gone before; token = the successor's fencing
--         token on a fenced hand-off, else 0; subscribers = how many subscriber connections the
--         release message reached (its waiters' clients: the releasing client's turns between
--         clients, docs/architecture.md), else 0. The code alone when token and subscribers
--         are 0.
local held = tonumber(redis.call('hget', KEYS[1], ARGV[2]))
if ARGV[8] == '1' then
  local done = redis.call('get', KEYS[3])
  if done then
    local sep = string.find(done, ':', 1, true)
    return {tonumber(string.sub(done, 1, sep - 1)), tonumber(string.sub(done, sep + 1))}
  end
  local freed = tonumber(redis.call('get', KEYS[5]) or '0')
  local seq = tonumber(ARGV[9])
  if freed == seq then
    return 1
  end
  if not held and freed > seq then
    return -2
  end
  -- Nothing recorded this request: the lost call did not run (or Redis lost it with the
  -- lock, in a restart or failover: then the owner holds nothing, answered as such).
end
if not held then
  return -1
end
if held > 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], -1)
  if ARGV[1] ~= '0' then
    redis.call('pexpire', KEYS[1], ARGV[1])
  end
  redis.call('set', KEYS[3], '0:0', 'px', ARGV[3])
  return 0
end
if ARGV[5] ~= '' then
  redis.call('hdel', KEYS[1], ARGV[2])
  redis.call('hincrby', KEYS[1], ARGV[5], 1)
  redis.call('pexpire', KEYS[1], ARGV[6])
  local token = 0
  if ARGV[7] == '1' then
    token = next_token(KEYS[4])
  end
  redis.call('set', KEYS[3], '2:' .. token, 'px', ARGV[3])
  return {2, token, 0}
end
redis.call('del', KEYS[1])
if ARGV[10] == '1' then
  redis.call('set', KEYS[3], '1:0', 'px', ARGV[3])
else
  redis.call('set', KEYS[5], ARGV[9], 'px', ARGV[3])
end
local subscribers = 0
if ARGV[4] ~= '' then
  subscribers = redis.call(ARGV[4], KEYS[2], '0')
end
if subscribers == 0 then
  return 1
end
return {1, 0, subscribers}
