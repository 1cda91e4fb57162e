-- ferrisson script
-- operation: lock/mutex_release
-- protocol: 1
-- Release a lean mutex if the owner's token holds it: free it and wake one waiter, or hand it
-- to a local waiter (the value swapped to the successor's token, nothing published).
-- KEYS[1] the mutex
-- KEYS[2] release channel, prefixed("ferrisson_mutex__channel", name)
-- KEYS[3] (a fenced hand-off only) fencing counter, prefixed("ferrisson_mutex_token", name)
-- ARGV[1] owner, the token
-- ARGV[2] publish command ("publish" or "spublish")
-- ARGV[3] (a hand-off only) the successor's token
-- ARGV[4] (a hand-off only) the successor's lease in milliseconds
-- returns {1, 0, subscribers the message reached} when freed, {2, token} when handed off (token
--         0 unless fenced; a resend whose first call handed off finds the successor's token and
--         answers so too), -1 when another token holds it or none does (a resent release whose
--         first call freed it answers -1 too: the layout keeps no record of releases);
--         WRONGTYPE when the key holds no string
local held = redis.pcall('get', KEYS[1])
if type(held) == 'table' then
  return redis.error_reply('WRONGTYPE the key holds no mutex')
end
if held ~= ARGV[1] then
  if ARGV[3] and held == ARGV[3] then
    return {2, KEYS[3] and tonumber(redis.call('get', KEYS[3]) or '0') or 0}
  end
  return -1
end
if ARGV[3] then
  redis.call('set', KEYS[1], ARGV[3], 'PX', ARGV[4])
  return {2, KEYS[3] and next_token(KEYS[3]) or 0}
end
redis.call('del', KEYS[1])
return {1, 0, redis.call(ARGV[2], KEYS[2], '0')}
