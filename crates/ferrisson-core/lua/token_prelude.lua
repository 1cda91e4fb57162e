-- ferrisson script
-- operation: core/token_prelude
-- protocol: 1
-- A fragment, not run alone: the fenced scripts start with it (Script::with_prelude), directly
-- or through core/lock_prelude, and call next_token. A script pays for each function its
-- prelude defines on every run, so a script that needs only this one starts with it alone.
--
-- next_token(key) issues a fencing token from the counter at `key` (Redisson's RFencedLock
-- counter prefixed("redisson_lock_token", name), or the lean mutex's
-- prefixed("ferrisson_mutex_token", name)). A token is the larger
-- of the counter + 1 and the server's clock in microseconds, and the counter is set to it. So
-- tokens only grow, even when the counter is lost (a restart without persistence, FLUSHALL, a
-- failover to a replica that missed the last increments): the clock has moved past every token
-- issued before, as long as the clock of the server that issues the next token is not behind the
-- last issuer's by more than the time that passed in between (docs/guarantees.md). The counter
-- stays an integer string, so Redisson's INCR on it keeps working and keeps growing it.
local function next_token(key)
  local time = redis.call('time')
  local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
  local token = math.max(tonumber(redis.call('get', key) or '0') + 1, now)
  -- '%.0f': Lua's default number format would round a 16-digit integer.
  redis.call('set', key, string.format('%.0f', token))
  return token
end

