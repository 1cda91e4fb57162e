-- ferrisson script
-- operation: rwlock/read_release
-- protocol: 1
-- Release one read hold. The lock's TTL becomes the longest lease left among the remaining
-- read holds (readers of a dead client drop out meanwhile [ext]); when no hold is left the
-- lock is deleted and "0" published (wake one waiter: a writer may now enter). A resend after a
-- lost reply gets the first result, from the client's record on the lock (core/release_prelude).
-- KEYS[1] lock hash
-- KEYS[2] release channel, prefixed("redisson_rwlock", name)
-- KEYS[3] the owner's hold-lease prefix, suffixed(name, owner) .. ":rwlock_timeout"
-- KEYS[4] the client's record on the lock [ext], suffixed(name, "record") .. ":" .. client id
-- KEYS[5] writer intent, prefixed("redisson_rwlock_writer", name): when a writer waits, the
--         last release publishes "1" instead [ext], so that the writer is woken even where
--         readers queued behind it are the longest-waiting local waiters
-- ARGV[1] owner
-- ARGV[2] publish command ("publish")
-- ARGV[3] the hold-lease key base, as for rwlock/write_acquire
-- ARGV[4] the release's slot in the record, ARGV[5] its sequence number, ARGV[6] (optional)
--         flags: "r" a resend, "e<ms>" set the record's TTL
-- returns -1 = the owner holds no read hold, 0 = holds remain, 1 = released (lock free)
local flags = ARGV[6] or ''
local done = release_recorded(KEYS[4], ARGV[4], ARGV[5])
if done then
  return done
end
local code = -1
if redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
  local count = redis.call('hincrby', KEYS[1], ARGV[1], -1)
  if count == 0 then
    redis.call('hdel', KEYS[1], ARGV[1])
  end
  redis.call('del', KEYS[3] .. ':' .. (count + 1))
  code = 0
  local longest = -3
  local writer = false
  for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
    if string.sub(field, -6) == ':write' then
      writer = true
    elseif field ~= 'mode' then
      local n = tonumber(redis.call('hget', KEYS[1], field)) or 0
      local alive = false
      for i = 1, n do
        local ttl = redis.call('pttl', ARGV[3] .. ':' .. field .. ':rwlock_timeout:' .. i)
        if ttl > 0 then
          alive = true
          longest = math.max(longest, ttl)
        end
      end
      if not alive then
        redis.call('hdel', KEYS[1], field)
      end
    end
  end
  if not writer then
    if longest > 0 then
      redis.call('pexpire', KEYS[1], longest)
    else
      redis.call('del', KEYS[1])
      local message = '0'
      if redis.call('exists', KEYS[5]) == 1 then
        message = '1'
      end
      redis.call(ARGV[2], KEYS[2], message)
      code = 1
    end
  end
end
release_record(KEYS[4], ARGV[4], ARGV[5], flags, code, 0)
return code
