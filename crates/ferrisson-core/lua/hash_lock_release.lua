-- ferrisson script
-- operation: core/hash_lock_release
-- protocol: 1
-- Release one hold of a lock kept in a hash (the reentrant lock's and the spin lock's), freeing
-- it (and waking a waiter) or handing it to a waiter of the releasing client. A retry after a
-- lost reply counts once: its outcome is recorded as core/release_prelude says (the client's
-- latch for a free, the request's own latch for anything else).
-- The call carries only what the free needs (each argument costs Redis about 0.14 us per call);
-- the release channel, the request's latch and the fencing counter are derived here, in the
-- lock's slot, from KEYS[1] and KEYS[2].
-- KEYS[1] lock hash
-- KEYS[2] the client's unlock latch, prefixed("redisson_unlock_latch", name) .. ":" .. the client
--         id in 32 hex digits; the request's own latch is the same key with the request id in
--         place of the client id
-- ARGV[1] owner
-- ARGV[2] the release's sequence number: a decimal integer, larger for each release the client
--         starts
-- ARGV[3] how long latches keep a result, in milliseconds
-- ARGV[4] publish command ("publish", "spublish"), or "" to publish nothing (the spin lock,
--         whose waiters poll, as Redisson's RSpinLock)
-- ARGV[5] the request id, 32 hex digits
-- ARGV[6] lease in milliseconds to set while holds remain, or "0" to leave the TTL alone
-- ARGV[7] (optional) flags, any of: "r" this call retries one whose reply was lost (the same
--         request), "l" record a free in the request's latch rather than the client's, "f" the
--         lock is fenced (a hand-off issues the successor a token)
-- ARGV[8] (a hand-off only) successor owner to hand the lock to when the last hold goes
-- ARGV[9] (a hand-off only) the successor's lease in milliseconds
-- returns a code, or {code, token, subscribers}: code -1 = the owner holds nothing, 0 = holds
--         remain, 1 = released (and "0" published), 2 = handed to the successor, -2 = (a retry
--         only) the owner holds nothing and a later free of this lock by the same client
--         overwrote what the lost call recorded (the client's "l" flag rules it out): the
--         script cannot tell a free from a hold gone before; token = the successor's fencing
--         token on a fenced hand-off, else 0; subscribers = how many subscriber connections the
--         release message reached (its waiters' clients: the releasing client's turns between
--         clients, docs/architecture.md), else 0. The code alone when token and subscribers
--         are 0.
local held = tonumber(redis.call('hget', KEYS[1], ARGV[1]))
local flags = ARGV[7] or ''
local function flag(f)
  return flags ~= '' and string.find(flags, f, 1, true)
end
if flag('r') then
  local done = release_resent(KEYS[2], ARGV[5], ARGV[2], held)
  if done then
    return done
  end
end
if not held then
  return -1
end
if held > 1 then
  redis.call('hincrby', KEYS[1], ARGV[1], -1)
  if ARGV[6] ~= '0' then
    redis.call('pexpire', KEYS[1], ARGV[6])
  end
  release_record(KEYS[2], ARGV[5], ARGV[2], ARGV[3], 0, 0)
  return 0
end
if ARGV[8] then
  redis.call('hdel', KEYS[1], ARGV[1])
  redis.call('hincrby', KEYS[1], ARGV[8], 1)
  redis.call('pexpire', KEYS[1], ARGV[9])
  local token = 0
  if flag('f') then
    token = next_token(prefixed('redisson_lock_token', KEYS[1]))
  end
  release_record(KEYS[2], ARGV[5], ARGV[2], ARGV[3], 2, token)
  return {2, token, 0}
end
redis.call('del', KEYS[1])
release_record(KEYS[2], ARGV[5], ARGV[2], ARGV[3], 1, 0, flag('l'))
local subscribers = 0
if ARGV[4] ~= '' then
  subscribers = redis.call(ARGV[4], prefixed('redisson_lock__channel', KEYS[1]), '0')
end
if subscribers == 0 then
  return 1
end
return {1, 0, subscribers}
