-- ferrisson script
-- operation: rwlock/write_leave
-- protocol: 1
-- A waiting writer gives up: its intent goes at once, so readers need not wait for it to
-- expire [ext].
-- KEYS[1] writer intent, prefixed("redisson_rwlock_writer", name)
-- KEYS[2] release channel, prefixed("redisson_rwlock", name)
-- ARGV[1] the owner's writer field, "<owner>:write"
-- ARGV[2] publish command ("publish")
-- returns 1 when the intent was the caller's and is gone (readers woken), else 0
if redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('del', KEYS[1])
  redis.call(ARGV[2], KEYS[2], '1')
  return 1
end
return 0
