-- ferrisson script
-- operation: lock/mutex_acquire
-- protocol: 1
-- Take a lean mutex ([ext], the standard Redlock layout that rslock, redsync, node-redlock and
-- redis-py's Lock share): the key holds the holder's token, here its owner. An unfenced first try
-- is not this script but the plain command `SET key owner NX PX lease GET` (nil: taken; the
-- holder's token: held; WRONGTYPE: no string); this script serves fenced tries, retries and the
-- tries of waiters, whose failed try marks that someone waits.
-- KEYS[1] the mutex (a string: the holder's token)
-- KEYS[2] the waiter marker, a key named as the release channel is,
--         prefixed("ferrisson_mutex__channel", name) (keys and channels are apart in Redis): while
--         it lives, a release publishes
-- KEYS[3] the client's undone marks on the mutex [ext] (core/marks_prelude): a copy of a resent
--         call that ran takes nothing
-- KEYS[4] (a fenced mutex only) fencing counter, prefixed("ferrisson_mutex_token", name), issued
--         by next_token (core/token_prelude)
-- ARGV[1] lease in milliseconds
-- ARGV[2] owner, the token
-- ARGV[3] flags: 'r' when this call retries one whose reply was lost, 'w' when the caller waits
--         for a release message: if it fails, the marker is set (unless the holder is another
--         Redlock client's: its release publishes nothing); if it takes the mutex, it publishes
--         't' on the channel, so that the waiters other clients woke deferred for the release
--         it took (their client had its turn) do not try at their fallback
-- ARGV[4] the call's sequence number (its resends carry it too)
-- ARGV[5] (with 'w') how long the marker lives, in milliseconds
-- ARGV[6] (optional, with 'w') the publish command when it is not "publish" ("spublish")
-- returns 1 when the owner now holds the mutex and it is not fenced, {1, 1, token} when it is
--         fenced, {0, PTTL} when another ferrisson owner (`<client uuid>:<n>`) holds it,
--         {0, PTTL, 1} when a token of another Redlock client holds it (the waiter arms
--         tracking instead of marking), {-1} when the owner holds it already
--         and this is no retry (a mutex is not reentrant), {0, 0} from a copy of a call that
--         another copy ran before; WRONGTYPE when the key holds no string
local retry = string.find(ARGV[3], 'r', 1, true)
local late = late_copy(KEYS[3], ARGV[4], retry)
local held = redis.call('get', KEYS[1])
if held == ARGV[2] then
  if not retry then
    return {-1}
  end
  -- The lost call took it: its token is the counter's, which no acquire has moved since.
  redis.call('pexpire', KEYS[1], ARGV[1])
  if KEYS[4] then
    return {1, 1, tonumber(redis.call('get', KEYS[4]) or '0')}
  end
  return 1
end
if late then
  return {0, 0}
end
if not held then
  redis.call('set', KEYS[1], ARGV[2], 'PX', ARGV[1])
  if string.find(ARGV[3], 'w', 1, true) then
    redis.call(ARGV[6] or 'publish', KEYS[2], 't')
  end
  if KEYS[4] then
    return {1, 1, next_token(KEYS[4])}
  end
  return 1
end
if #held < 38 or string.byte(held, 37) ~= 58 then
  return {0, redis.call('pttl', KEYS[1]), 1}
end
if string.find(ARGV[3], 'w', 1, true) then
  redis.call('set', KEYS[2], '1', 'PX', ARGV[5])
end
return {0, redis.call('pttl', KEYS[1])}
