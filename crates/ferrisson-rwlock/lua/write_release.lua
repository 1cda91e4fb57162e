-- ferrisson script
-- operation: rwlock/write_release
-- protocol: 1
-- Release one write hold. When the last goes, the lock is deleted, or passes to read mode if
-- the writer still holds read holds (downgrade); either way "1" is published (wake every
-- waiter: readers may enter) [ext: Redisson publishes nothing on a downgrade]. A resend after a
-- lost reply gets the first result, from the client's record on the lock (core/release_prelude).
-- KEYS[1] lock hash
-- KEYS[2] release channel, prefixed("redisson_rwlock", name)
-- KEYS[3] the client's record on the lock [ext], suffixed(name, "record") .. ":" .. client id
-- ARGV[1] the owner's writer field, "<owner>:write"
-- ARGV[2] lease in milliseconds to set while write holds remain, or "0" to leave the TTL alone
-- ARGV[3] publish command ("publish")
-- ARGV[4] the release's slot in the record, ARGV[5] its sequence number, ARGV[6] (optional)
--         flags: "r" a resend, "e<ms>" set the record's TTL
-- returns -1 = the owner holds no write hold, 0 = write holds remain, 1 = write lock released
local flags = ARGV[6] or ''
local done = release_recorded(KEYS[3], ARGV[4], ARGV[5])
if done then
  return done
end
local code = -1
if redis.call('hget', KEYS[1], 'mode') == 'write' and redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
  if redis.call('hincrby', KEYS[1], ARGV[1], -1) > 0 then
    if ARGV[2] ~= '0' then
      redis.call('pexpire', KEYS[1], ARGV[2])
    end
    code = 0
  else
    redis.call('hdel', KEYS[1], ARGV[1])
    if redis.call('hlen', KEYS[1]) == 1 then
      redis.call('del', KEYS[1])
    else
      redis.call('hset', KEYS[1], 'mode', 'read')
    end
    redis.call(ARGV[3], KEYS[2], '1')
    code = 1
  end
end
release_record(KEYS[3], ARGV[4], ARGV[5], flags, code, 0)
return code
