-- ferrisson script
-- operation: core/hash_lock_release
-- protocol: 1
-- Release one hold of a lock kept in a hash (the reentrant lock's and the spin lock's), freeing
-- it (and waking a waiter) or handing it to a waiter of the releasing client. A resend after a
-- lost reply counts once: the outcome is recorded in the client's record (core/release_prelude).
-- The call carries only what the free needs (each argument costs Redis about 0.14 us per call);
-- the release channel and the fencing counter are derived here, in the lock's slot, from
-- KEYS[1].
-- KEYS[1] lock hash
-- KEYS[2] the client's record on the lock [ext], suffixed(name, "record") .. ":" .. the client
--         id in 32 hex digits (core/record_prelude)
-- ARGV[1] owner
-- ARGV[2] publish command ("publish", "spublish"), or "" to publish nothing (the spin lock,
--         whose waiters poll, as Redisson's RSpinLock)
-- ARGV[3] lease in milliseconds to set while holds remain, or "0" to leave the TTL alone
-- ARGV[4] the release's slot in the record, ARGV[5] its sequence number
-- ARGV[6] (optional) flags, any of: "r" this call resends one whose reply was lost, "e<ms>"
--         set the record's TTL, "f" the lock is fenced (a hand-off issues the successor a token)
-- ARGV[7] (a hand-off only) successor owner to hand the lock to when the last hold goes
-- ARGV[8] (a hand-off only) the successor's lease in milliseconds
-- returns a code, or {code, token, subscribers}: code -1 = the owner holds nothing, 0 = holds
--         remain, 1 = released (and "0" published), 2 = handed to the successor; token = the
--         successor's fencing token on a fenced hand-off, else 0; subscribers = how many
--         subscriber connections the release message reached (its waiters' clients: the
--         releasing client's turns between clients, docs/architecture.md), else 0. The code
--         alone when token and subscribers are 0.
local held = tonumber(redis.call('hget', KEYS[1], ARGV[1]))
local flags = ARGV[6] or ''
local done = release_recorded(KEYS[2], ARGV[4], ARGV[5])
if done then
  return done
end
if not held then
  return -1
end
if held > 1 then
  redis.call('hincrby', KEYS[1], ARGV[1], -1)
  if ARGV[3] ~= '0' then
    redis.call('pexpire', KEYS[1], ARGV[3])
  end
  release_record(KEYS[2], ARGV[4], ARGV[5], flags, 0, 0)
  return 0
end
if ARGV[7] then
  redis.call('hdel', KEYS[1], ARGV[1])
  redis.call('hincrby', KEYS[1], ARGV[7], 1)
  redis.call('pexpire', KEYS[1], ARGV[8])
  local token = 0
  if string.find(flags, 'f', 1, true) then
    token = next_token(prefixed('redisson_lock_token', KEYS[1]))
  end
  release_record(KEYS[2], ARGV[4], ARGV[5], flags, 2, token)
  return {2, token, 0}
end
redis.call('del', KEYS[1])
release_record(KEYS[2], ARGV[4], ARGV[5], flags, 1, 0)
local subscribers = 0
if ARGV[2] ~= '' then
  subscribers = redis.call(ARGV[2], prefixed('redisson_lock__channel', KEYS[1]), '0')
end
if subscribers == 0 then
  return 1
end
return {1, 0, subscribers}
