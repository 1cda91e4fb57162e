-- ferrisson script
-- operation: fair_lock/release
-- protocol: 1
-- Release one hold of a fair lock; when the last goes, free it and wake the head waiter alone
-- (on its own channel). A retry after a lost reply counts once: its outcome is recorded as
-- core/release_prelude says (a free in the client's latch, anything else in the request's own).
-- KEYS[1] lock hash
-- KEYS[2] waiter queue, prefixed("redisson_lock_queue", name)
-- KEYS[3] release channel prefix, prefixed("redisson_lock__channel", name)
-- KEYS[4] the client's unlock latch, prefixed("redisson_unlock_latch", name) .. ":" .. the
--         client id in 32 hex digits (the request's own: the request id in its place)
-- KEYS[5] waiter timeouts, prefixed("redisson_lock_timeout", name)
-- KEYS[6] liveness deadlines of ferrisson waiters [ext], suffixed(name, "alive")
-- ARGV[1] lease in milliseconds to set while holds remain, or "0" to leave the TTL alone
-- ARGV[2] owner
-- ARGV[3] how long latches keep a result, in milliseconds
-- ARGV[4] publish command ("publish")
-- ARGV[5] the release's sequence number: larger for each release the client starts
-- ARGV[6] the request id, 32 hex digits
-- ARGV[7] (optional) flags, any of: "r" this call resends one whose reply was lost, "l" record
--         a free in the request's latch rather than the client's
-- returns -1 = the owner holds nothing, 0 = holds remain, 1 = released (the first live waiter
--         woken: dead ones at the head are dropped first, as Redisson's unlock does; and "0"
--         published on KEYS[3] itself [ext], for the lock's watchers, Lock::wait_unlocked: a
--         fair lock's waiters, Redisson's and ours, each listen on their own channel), -2 =
--         (a resend only) the owner holds nothing and a later free by the same client
--         overwrote what the lost call recorded; a resend answered from a request's latch
--         replies {code, 0}
local held = tonumber(redis.call('hget', KEYS[1], ARGV[2]))
local flags = ARGV[7] or ''
if flags ~= '' and string.find(flags, 'r', 1, true) then
  local done = release_resent(KEYS[4], ARGV[6], ARGV[5], held)
  if done then
    return done
  end
end
if not held then
  return -1
end
local code = 1
if held > 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], -1)
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
end
release_record(KEYS[4], ARGV[6], ARGV[5], ARGV[3], code, 0,
  flags ~= '' and string.find(flags, 'l', 1, true))
return code
