-- ferrisson script
-- operation: lock/mutex_release
-- protocol: 1
-- Release a lean mutex if the owner's token holds it, and wake one waiter.
-- KEYS[1] the mutex
-- KEYS[2] release channel, prefixed("ferrisson_mutex__channel", name)
-- ARGV[1] owner, the token
-- ARGV[2] publish command ("publish" or "spublish")
-- returns 1 when released, -1 when another token holds it or none does (a resent release
--         whose first call freed it answers -1 too: the layout keeps no record of releases);
--         WRONGTYPE when the key holds no string
local held = redis.pcall('get', KEYS[1])
if type(held) == 'table' then
  return redis.error_reply('WRONGTYPE the key holds no mutex')
end
if held ~= ARGV[1] then
  return -1
end
redis.call('del', KEYS[1])
redis.call(ARGV[2], KEYS[2], '0')
return 1
