-- ferrisson script
-- operation: fair_lock/acquire
-- protocol: 1
-- Take or re-enter a fair lock (Redisson RFairLock layout) in queue order, or join the queue /
-- keep the caller's place in it alive; optionally with a fencing token.
-- KEYS[1] lock hash (field = owner, value = hold count)
-- KEYS[2] waiter queue, prefixed("redisson_lock_queue", name): LIST of owners, FIFO
-- KEYS[3] waiter timeouts, prefixed("redisson_lock_timeout", name): ZSET owner -> epoch ms, kept
--         with Redisson's arithmetic for every waiter: a new waiter's timeout is the last
--         waiter's (or now + the lock's PTTL) plus the wait time ARGV[9]; each acquisition from
--         the queue brings every remaining timeout closer by the wait time; a timeout passed
--         means dead. Never given an expiry (Redisson gives none)
-- KEYS[4] fencing counter, prefixed("redisson_lock_token", name), issued by next_token (core/lock_prelude); touched only when ARGV[7] = "1"
-- KEYS[5] release channel prefix, prefixed("redisson_lock__channel", name); a waiter's channel
--         is KEYS[5] .. ":" .. owner
-- ARGV[1] lease in milliseconds
-- ARGV[2] owner, "<client-id>:<n>"
-- KEYS[6] liveness deadlines of ferrisson waiters [ext], suffixed(name, "alive"): ZSET owner ->
--         epoch ms; expires after its latest deadline
-- ARGV[3] liveness deadline in milliseconds from now: a queued ferrisson waiter that has not
--         called again by then is dead, and is dropped when it reaches the head [ext]
-- ARGV[4] "wait" to join (or stay in) the queue when the lock cannot be taken, "try" not to
-- ARGV[5] hold count the client believes the owner has
-- ARGV[6] "1" when this call retries one whose reply was lost, else "0"
-- ARGV[7] "1" for a fenced lock, else "0"
-- ARGV[8] publish command ("publish")
-- ARGV[9] Redisson's thread wait time in milliseconds (RedissonFairLock's, 300000 by default)
-- returns {1, hold count, token} when the owner now holds the lock (token 0 when not fenced),
--         {0, PTTL of the lock (-2 when free but others queue first)} otherwise
local kind = redis.call('type', KEYS[1]).ok
if kind ~= 'none' and kind ~= 'hash' then
  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
local owner = ARGV[2]
local function token_of(increment)
  if ARGV[7] ~= '1' then
    return 0
  end
  if increment then
    return next_token(KEYS[4])
  end
  return tonumber(redis.call('get', KEYS[4]) or '0')
end
local held = tonumber(redis.call('hget', KEYS[1], owner) or '0')
if held == 0 and kind == 'hash' then
  -- Held by another owner, or not a lock at all (a user's hash): never wait on that.
  local foreign = foreign_lock(KEYS[1], false)
  if foreign then
    return foreign
  end
end
if ARGV[6] == '1' and held == tonumber(ARGV[5]) + 1 then
  -- The lost attempt ran: the owner holds one more than it believes.
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {1, held, token_of(false)}
end
if held > 0 then
  held = redis.call('hincrby', KEYS[1], owner, 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {1, held, token_of(true)}
end
local now = server_ms()
local wait = tonumber(ARGV[9])
-- Drop dead waiters at the head (never the caller: it is alive, it is calling).
local head, dropped = fair_purge(KEYS[2], KEYS[3], KEYS[6], now, owner)
if kind == 'none' and (not head or head == owner) then
  if head then
    redis.call('lpop', KEYS[2])
  end
  redis.call('zrem', KEYS[3], owner)
  redis.call('zrem', KEYS[6], owner)
  -- As Redisson does: everyone left moves up a place, so their timeouts come a wait closer.
  for _, waiter in ipairs(redis.call('zrange', KEYS[3], 0, -1)) do
    redis.call('zincrby', KEYS[3], -wait, waiter)
  end
  redis.call('hset', KEYS[1], owner, 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {1, 1, token_of(true)}
end
if kind == 'none' and dropped and head then
  -- The lock is free and its release went to a waiter found dead: wake the new head.
  redis.call(ARGV[8], KEYS[5] .. ':' .. head, '0')
end
if ARGV[4] == 'wait' then
  local pttl = math.max(redis.call('pttl', KEYS[1]), 0)
  local place = redis.call('lpos', KEYS[2], owner)
  local timeout
  if place then
    -- Queued: a timeout Redisson's arithmetic would give this place now, or later. Redisson's
    -- acquisitions ahead take a wait off per place gained, so a live waiter never looks dead.
    timeout = math.max(tonumber(redis.call('zscore', KEYS[3], owner)) or 0,
      now + pttl + wait * (place + 1))
  else
    -- Joining: Redisson's rule, the last waiter's timeout (or the lock's) plus a wait.
    local last = redis.call('lindex', KEYS[2], -1)
    local base = last and tonumber(redis.call('zscore', KEYS[3], last))
    timeout = (base or (now + pttl)) + wait
    redis.call('rpush', KEYS[2], owner)
  end
  redis.call('zadd', KEYS[3], timeout, owner)
  redis.call('zadd', KEYS[6], now + tonumber(ARGV[3]), owner)
  local latest = redis.call('zrange', KEYS[6], -1, -1, 'WITHSCORES')
  redis.call('pexpireat', KEYS[6], tonumber(latest[2]) + 1000)
end
return {0, redis.call('pttl', KEYS[1])}
