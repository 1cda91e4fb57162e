-- ferrisson script
-- operation: lock/non_reentrant_acquire
-- protocol: 1
-- Take a non-reentrant lock (Redisson's RNonReentrantLock: the RLock hash layout, one hold per
-- owner at most), optionally with a fencing token: core/hash_lock_acquire with re-entry refused.
-- Release, renewal, hand-off and force release are the RLock layout's (core/hash_lock_*).
-- KEYS[1] lock hash (field = owner, value = 1)
-- KEYS[2] the client's undone marks on the lock [ext] (core/marks_prelude): a copy of a resent
--         call that ran takes nothing
-- KEYS[3] (a fenced lock only) fencing counter, prefixed("redisson_lock_token", name), issued by
--         next_token (core/lock_prelude)
-- ARGV[1] lease in milliseconds
-- ARGV[2] owner, "<client-id>:<n>"
-- ARGV[3] the call's sequence number (its resends carry it too)
-- ARGV[4] (a retry only) the hold count the client believes the owner has (0: it never holds
--         this lock twice)
-- returns the hold count 1 when the owner now holds the lock and the lock is not fenced,
--         {1, 1, token} when it is fenced, {0, PTTL of the lock} when another owner holds it,
--         -2 when the owner holds it already (the engine's REENTRY_REFUSED: Redisson throws
--         IllegalMonitorStateException "... is non-reentrant and is already held by ..."),
--         {0, 0} from a copy of a call that another copy ran before
local late = late_copy(KEYS[2], ARGV[3], ARGV[4])
local held = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or '0')
if held > 0 then
  if ARGV[4] and held == tonumber(ARGV[4]) + 1 then
    -- The lost attempt ran: this owner's hold is the one it took.
    redis.call('pexpire', KEYS[1], ARGV[1])
    if not KEYS[3] then
      return held
    end
    return {1, held, tonumber(redis.call('get', KEYS[3]) or '0')}
  end
  return -2
end
if late then
  return {0, 0}
end
if redis.call('exists', KEYS[1]) == 0 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  if not KEYS[3] then
    return 1
  end
  return {1, 1, next_token(KEYS[3])}
end
-- Held by another owner, or not a lock at all (a user's hash): never wait on that (held_ttl).
local ttl, foreign = held_ttl(KEYS[1])
if foreign then
  return foreign
end
return {0, ttl}
