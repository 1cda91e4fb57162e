-- ferrisson script
-- operation: spin_lock/acquire
-- protocol: 1
-- Take or re-enter a spin lock (Redisson's RSpinLock layout: the reentrant lock's hash), with
-- the next-in-line reservation [ext] that makes the lock fair across clients: the reentrant
-- lock's acquire (core/hash_lock_acquire) plus one key.
--
-- The reservation, tagged(name) .. ":next" [ext]: "<since>|<at>|<owner>", with a PX of the
-- reservation time: the waiter that has waited longest among those that tried lately (waiting
-- since the server's millisecond `since`, holding the reservation since `at`). While it stands,
-- only that owner may take the lock when it is free (Redisson's RSpinLock ignores it, and it ends
-- by itself one reservation time after its waiter last tried). A failed try of a waiting caller
-- takes it when there is none, or when the caller has waited longer than its holder. A young
-- reservation does not bind: for the patience (a few ms) the lock still goes to whoever comes,
-- so a busy lock keeps its pace; after that, a free lock goes to the reservation's waiter only.
-- That waiter is told to try again at its shortest pause ({0, 0}) until the reservation binds,
-- then after a quarter of the time since, at most half the reservation time: a release is
-- taken within a fraction of the hold it followed, and a long hold costs a few tries. Without it, the holder's client took the
-- lock back at once after each release (the others slept through their backoff): one process
-- of four got 0.05 of its fair share.
--
-- KEYS[1] lock hash (field = owner, value = hold count)
-- KEYS[2] the client's undone marks on the lock [ext] (core/marks_prelude): a copy of a resent
--         call that ran takes nothing
-- KEYS[3] (a fenced lock only) fencing counter, prefixed("redisson_lock_token", name)
-- ARGV[1] lease in milliseconds
-- ARGV[2] owner, "<client-id>:<n>"
-- ARGV[3] how long the caller has waited, ms ("0": a first try, which never takes the
--         reservation but respects it)
-- ARGV[4] the reservation time, ms
-- ARGV[5] the patience, ms: how long a reservation stands before it binds
-- ARGV[6] the call's sequence number (its resends carry it too)
-- ARGV[7] (a retry only) the hold count the client believes the owner has
-- returns the hold count, or {1, hold count, token} when fenced, as core/hash_lock_acquire;
--         {0, PTTL of the lock, or of the reservation when the lock is free} when another owner
--         holds it or the reservation is another's; {0, pause in ms} when the caller holds the
--         reservation (0: its shortest pause); {0, 0} from a copy of a call that another copy
--         ran before
local late = late_copy(KEYS[2], ARGV[6], ARGV[7])
if ARGV[7] then
  local held = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or '0')
  if held == tonumber(ARGV[7]) + 1 then
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
local next_key = tagged(KEYS[1]) .. ':next'
local reserved = redis.call('get', next_key)
local mine = false
local since, at, holder
if reserved then
  local a = string.find(reserved, '|', 1, true)
  local b = a and string.find(reserved, '|', a + 1, true)
  if b then
    since = tonumber(string.sub(reserved, 1, a - 1))
    at = tonumber(string.sub(reserved, a + 1, b - 1))
    holder = string.sub(reserved, b + 1)
    mine = holder == ARGV[2]
  end
end
local free = redis.call('exists', KEYS[1]) == 0
local function now_ms()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- A young reservation does not bind yet: the lock goes to whoever comes, at full speed, and
-- only a reservation that has stood for the patience hands the lock over.
local binding = free and holder and not mine and now_ms() - at >= tonumber(ARGV[5])
if (free and not binding) or (not free and redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
  if mine then
    redis.call('del', next_key)
  end
  local held = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  if not KEYS[3] then
    return held
  end
  return {1, held, next_token(KEYS[3])}
end
local ttl
if free then
  ttl = redis.call('pttl', next_key)
else
  -- Held by another owner, or not a lock at all (held_ttl).
  local foreign
  ttl, foreign = held_ttl(KEYS[1])
  if foreign then
    return foreign
  end
end
local waited = tonumber(ARGV[3]) or 0
if waited > 0 then
  local now = now_ms()
  local mine_since = now - waited
  if mine and since and at then
    redis.call('set', next_key, since .. '|' .. at .. '|' .. ARGV[2], 'px', ARGV[4])
    local bound = now - at - tonumber(ARGV[5])
    return {0, math.max(0, math.min(math.floor(bound / 4), math.floor(tonumber(ARGV[4]) / 2)))}
  end
  if not since or mine_since < since then
    redis.call('set', next_key, mine_since .. '|' .. now .. '|' .. ARGV[2], 'px', ARGV[4])
    return {0, 0}
  end
end
return {0, ttl}
