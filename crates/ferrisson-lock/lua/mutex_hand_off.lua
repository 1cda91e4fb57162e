-- ferrisson script
-- operation: lock/mutex_hand_off
-- protocol: 1
-- Hand a lean mutex the owner's token holds to a waiter of the same client in one call: the
-- value becomes the successor's token, with the successor's lease; nothing is published.
-- KEYS[1] the mutex
-- KEYS[2] (a fenced mutex only) fencing counter, prefixed("ferrisson_mutex_token", name), issued
--         by next_token (core/token_prelude)
-- ARGV[1] owner, the token
-- ARGV[2] the successor's token
-- ARGV[3] the successor's lease in milliseconds
-- returns {2, token} when handed off (token 0 unless fenced; a resend whose first call handed
--         off finds the successor's token and answers so too, with the counter's token), -1
--         when another token holds it or none does; WRONGTYPE when the key holds no string
local held = redis.call('get', KEYS[1])
if held == ARGV[2] then
  return {2, KEYS[2] and tonumber(redis.call('get', KEYS[2]) or '0') or 0}
end
if held ~= ARGV[1] then
  return -1
end
redis.call('set', KEYS[1], ARGV[2], 'PX', ARGV[3])
return {2, KEYS[2] and next_token(KEYS[2]) or 0}
