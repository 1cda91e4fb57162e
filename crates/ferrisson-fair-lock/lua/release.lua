-- ferrisson script
-- operation: fair_lock/release
-- protocol: 1
-- Release one hold of a fair lock; when the last goes, free it and wake the head waiter alone
-- (on its own channel). A resend after a lost reply counts once: the outcome is recorded in the
-- client's record on the lock (core/release_prelude).
-- KEYS[1] lock hash. Derived from it, in its slot (each argument costs Redis about 0.2 us per
--         call): the waiter queue prefixed("redisson_lock_queue", name), the release channel
--         prefix prefixed("redisson_lock__channel", name), the waiter timeouts
--         prefixed("redisson_lock_timeout", name) and the liveness deadlines of ferrisson
--         waiters [ext] suffixed(name, "alive")
-- KEYS[2] the client's record on the lock [ext], suffixed(name, "record") .. ":" .. the client
--         id in 32 hex digits (core/record_prelude)
-- ARGV[1] lease in milliseconds to set while holds remain, or "0" to leave the TTL alone
-- ARGV[2] owner
-- ARGV[3] publish command ("publish")
-- ARGV[4] the release's slot in the record, ARGV[5] its sequence number
-- ARGV[6] (optional) flags, any of: "r" this call resends one whose reply was lost, "e<ms>"
--         set the record's TTL
-- returns -1 = the owner holds nothing, 0 = holds remain, 1 = released (the first live waiter
--         woken: dead ones at the head are dropped first, as Redisson's unlock does; and "0"
--         published on the channel prefix itself [ext], for the lock's watchers, Lock::wait_unlocked: a
--         fair lock's waiters, Redisson's and ours, each listen on their own channel); a
--         resend answered from the record replies {code, 0}
local held = tonumber(redis.call('hget', KEYS[1], ARGV[2]))
local flags = ARGV[6] or ''
local done = release_recorded(KEYS[2], ARGV[4], ARGV[5])
if done then
  return done
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
  local channel = prefixed('redisson_lock__channel', KEYS[1])
  local queue = prefixed('redisson_lock_queue', KEYS[1])
  -- Nobody queued (the uncontended path): no clock read, no purge.
  local head = redis.call('lindex', queue, 0)
  if head then
    head = fair_purge(queue, prefixed('redisson_lock_timeout', KEYS[1]),
      tagged(KEYS[1]) .. ':alive', server_ms(), nil)
  end
  if head then
    redis.call(ARGV[3], channel .. ':' .. head, '0')
  end
  redis.call(ARGV[3], channel, '0')
end
release_record(KEYS[2], ARGV[4], ARGV[5], flags, code, 0)
return code
