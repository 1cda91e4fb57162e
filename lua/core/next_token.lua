-- ferrisson script
-- operation: core/next_token
-- protocol: 1
-- A fragment, not run alone: the scripts that hand out fencing tokens start with it
-- (Script::with_prelude) and call next_token(key) to issue a token from the counter at `key`
-- (prefixed("redisson_lock_token", name), Redisson's RFencedLock counter).
--
-- A token is the larger of the counter + 1 and the server's clock in microseconds, and the
-- counter is set to it. So tokens only grow, even when the counter is lost (a restart without
-- persistence, FLUSHALL, a failover to a replica that missed the last increments): the clock has
-- moved past every token issued before, as long as the clock of the server that issues the next
-- token is not behind the last issuer's by more than the time that passed in between
-- (docs/guarantees.md). The counter stays an integer string, so Redisson's INCR on it keeps
-- working and keeps growing it.
local function next_token(key)
  local time = redis.call('time')
  local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
  local token = math.max(tonumber(redis.call('get', key) or '0') + 1, now)
  -- '%.0f': Lua's default number format would round a 16-digit integer.
  redis.call('set', key, string.format('%.0f', token))
  return token
end
