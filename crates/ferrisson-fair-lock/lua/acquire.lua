-- ferrisson script
-- operation: fair_lock/acquire
-- protocol: 1
-- Take or re-enter a fair lock (Redisson RFairLock layout) in queue order, or join the queue /
-- keep the caller's place in it alive; optionally with a fencing token.
-- KEYS[1] lock hash (field = owner, value = hold count).
-- KEYS[2] the client's undone marks on the lock [ext] (core/marks_prelude): a copy of a resent
--         call that ran takes nothing, and joins no queue.
-- The other keys are derived from KEYS[1], in its slot (each argument costs Redis about 0.2 us
-- per call):
-- the waiter queue, prefixed("redisson_lock_queue", name): LIST of owners, FIFO;
-- the waiter timeouts, prefixed("redisson_lock_timeout", name): ZSET owner -> epoch ms, kept
--   with Redisson's arithmetic for every waiter: a new waiter's timeout is the last waiter's (or
--   now + the lock's PTTL) plus the wait time; each acquisition from the queue brings every
--   remaining timeout closer by the wait time; a timeout passed means dead. Never given an
--   expiry (Redisson gives none);
-- the fencing counter, prefixed("redisson_lock_token", name), issued by next_token
--   (core/lock_prelude), touched only with flag "f";
-- the release channel prefix, prefixed("redisson_lock__channel", name): a waiter's channel is
--   it .. ":" .. owner;
-- the liveness deadlines of ferrisson waiters [ext], suffixed(name, "alive"): ZSET owner ->
--   epoch ms; expires after its latest deadline
-- ARGV[1] lease in milliseconds
-- ARGV[2] owner, "<client-id>:<n>"
-- ARGV[3] flags, any of: "w" join (or stay in) the queue when the lock cannot be taken (else a
--         try), "f" a fenced lock, "s" publish with SPUBLISH (else PUBLISH), "r" this call
--         retries one whose reply was lost (then ARGV[6] is the hold count the client believes
--         the owner has), "n" a non-reentrant lock: an owner that holds it already is refused
-- ARGV[4] "<liveness>:<wait>", or "<liveness>:<wait>:t" for a try with a wait: the liveness
--         deadline in milliseconds from now (a queued ferrisson waiter that has not called
--         again by then is dead, and is dropped when it reaches the head [ext]) and the step of
--         Redisson's queue arithmetic in milliseconds: a try's wait (Redisson's tryLock with a
--         wait uses it), else Redisson's thread wait time (RedissonFairLock's, 300000 by
--         default)
-- ARGV[5] the call's sequence number (its resends carry it too)
-- ARGV[6] (with "r") the hold count the client believes the owner has
-- returns {1, hold count, token} when the owner now holds the lock (token 0 when not fenced),
--         or 1 alone when it took a free lock nobody queued for and it is not fenced,
--         -2 when it holds it already and the lock is non-reentrant ("n": the engine's
--         REENTRY_REFUSED), {0, 0} from a copy of a call that another copy ran before,
--         {0, PTTL of the lock (-2 when free but others queue first)} otherwise
local kind = redis.call('type', KEYS[1]).ok
if kind ~= 'none' and kind ~= 'hash' then
  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
local owner = ARGV[2]
local flags = ARGV[3]
local function flag(f)
  return string.find(flags, f, 1, true) ~= nil
end
local function token_of(increment)
  if not flag('f') then
    return 0
  end
  local counter = prefixed('redisson_lock_token', KEYS[1])
  if increment then
    return next_token(counter)
  end
  return tonumber(redis.call('get', counter) or '0')
end
local late = late_copy(KEYS[2], ARGV[5], flag('r') or nil)
local held = tonumber(redis.call('hget', KEYS[1], owner) or '0')
if held == 0 and kind == 'hash' then
  -- Held by another owner, or not a lock at all (a user's hash): never wait on that.
  local foreign = foreign_lock(KEYS[1], false)
  if foreign then
    return foreign
  end
end
if flag('r') and held == tonumber(ARGV[6]) + 1 then
  -- The lost attempt ran: the owner holds one more than it believes.
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {1, held, token_of(false)}
end
if late then
  return {0, 0}
end
if held > 0 then
  if flag('n') then
    return -2
  end
  held = redis.call('hincrby', KEYS[1], owner, 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {1, held, token_of(true)}
end
local queue = prefixed('redisson_lock_queue', KEYS[1])
if kind == 'none' and not redis.call('lindex', queue, 0) then
  -- Free, and nobody queues: taken (the uncontended path reads no clock and parses no waiting
  -- times, and answers an integer when unfenced: it costs Redis less than a table).
  redis.call('hset', KEYS[1], owner, 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  if not flag('f') then
    return 1
  end
  return {1, 1, token_of(true)}
end
local now = server_ms()
local liveness, wait, limited = string.match(ARGV[4], '^(%d+):(%d+)(:?t?)$')
liveness, wait, limited = tonumber(liveness), tonumber(wait), limited == ':t'
local timeouts = prefixed('redisson_lock_timeout', KEYS[1])
local alive = tagged(KEYS[1]) .. ':alive'
-- Drop dead waiters at the head (never the caller: it is alive, it is calling).
local head, dropped = fair_purge(queue, timeouts, alive, now, owner)
if kind == 'none' and (not head or head == owner) then
  if head then
    redis.call('lpop', queue)
    redis.call('zrem', timeouts, owner)
    redis.call('zrem', alive, owner)
    -- As Redisson does: everyone left moves up a place, so their timeouts come a wait closer.
    for _, waiter in ipairs(redis.call('zrange', timeouts, 0, -1)) do
      redis.call('zincrby', timeouts, -wait, waiter)
    end
  end
  redis.call('hset', KEYS[1], owner, 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {1, 1, token_of(true)}
end
if kind == 'none' and dropped and head then
  -- The lock is free and its release went to a waiter found dead: wake the new head.
  redis.call(flag('s') and 'spublish' or 'publish', prefixed('redisson_lock__channel', KEYS[1]) .. ':' .. head, '0')
end
if flag('w') then
  local pttl = math.max(redis.call('pttl', KEYS[1]), 0)
  local place = redis.call('lpos', queue, owner)
  local timeout
  if place and limited then
    -- Queued by a try with a wait, which leaves the queue once its wait is over: its timeout
    -- stays Redisson's, kept at least its wait ahead (Redisson's acquisitions ahead take their
    -- waits off it), so that it never looks dead before it leaves.
    timeout = math.max(tonumber(redis.call('zscore', timeouts, owner)) or 0, now + wait)
  elseif place then
    -- Queued: a timeout Redisson's arithmetic would give this place now, or later. Redisson's
    -- acquisitions ahead take a wait off per place gained, so a live waiter never looks dead.
    timeout = math.max(tonumber(redis.call('zscore', timeouts, owner)) or 0,
      now + pttl + wait * (place + 1))
  else
    -- Joining: Redisson's rule, the last waiter's timeout (or the lock's) plus a wait.
    local last = redis.call('lindex', queue, -1)
    local base = last and tonumber(redis.call('zscore', timeouts, last))
    timeout = (base or (now + pttl)) + wait
    redis.call('rpush', queue, owner)
  end
  redis.call('zadd', timeouts, timeout, owner)
  redis.call('zadd', alive, now + liveness, owner)
  local latest = redis.call('zrange', alive, -1, -1, 'WITHSCORES')
  redis.call('pexpireat', alive, tonumber(latest[2]) + 1000)
end
return {0, redis.call('pttl', KEYS[1])}
