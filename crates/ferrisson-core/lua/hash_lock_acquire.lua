-- ferrisson script
-- operation: core/hash_lock_acquire
-- protocol: 1
-- Take or re-enter a lock kept in a hash (Redisson's RLock and RSpinLock layout), optionally
-- with a fencing token: the reentrant lock's acquire (the spin lock's, spin_lock/acquire, is
-- this one with a reservation). The call carries only what its path needs (each argument costs
-- Redis about 0.14 us per call): the optional parts are told by their presence.
-- KEYS[1] lock hash (field = owner, value = hold count)
-- KEYS[2] the client's undone marks on the lock [ext] (core/marks_prelude): a copy of a resent
--         call that ran takes nothing
-- KEYS[3] (a fenced lock only) fencing counter, prefixed("redisson_lock_token", name), issued by
--         next_token (core/lock_prelude); its presence makes the lock fenced
-- ARGV[1] lease in milliseconds
-- ARGV[2] owner, "<client-id>:<n>"
-- ARGV[3] the call's sequence number (the client's, once per call: its resends carry it too)
-- ARGV[4] (a retry only) the hold count the client believes the owner has: present when this
--         call retries one whose reply was lost
-- returns the hold count (an integer, at least 1) when the owner now holds the lock and the lock
--         is not fenced, {1, hold count, token} when it is fenced, {0, PTTL of the lock} when
--         another owner holds it (an integer reply costs Redis less than a table: this is the
--         hottest call of the suite); {0, 0} from a copy of a call that another copy ran
--         before (look again at once)
local late = late_copy(KEYS[2], ARGV[3], ARGV[4])
if ARGV[4] then
  -- The lost attempt may have run: then the owner holds one more than it believes.
  local held = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or '0')
  if held == tonumber(ARGV[4]) + 1 then
    redis.call('pexpire', KEYS[1], ARGV[1])
    if not KEYS[3] then
      return held
    end
    return {1, held, tonumber(redis.call('get', KEYS[3]) or '0')}
  end
end
if late then
  return {0, 0}
end
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  local held = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  if not KEYS[3] then
    return held
  end
  return {1, held, next_token(KEYS[3])}
end
-- Held by another owner, or not a lock at all (a user's hash): never wait on that (held_ttl).
-- The key is a hash: HEXISTS failed on any other type above.
local ttl, foreign = held_ttl(KEYS[1])
if foreign then
  return foreign
end
return {0, ttl}
