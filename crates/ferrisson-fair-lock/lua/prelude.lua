-- ferrisson script
-- operation: fair_lock/prelude
-- protocol: 1
-- A fragment, not run alone: the fair lock's scripts start with it (after core/lock_prelude,
-- core/release_prelude, Script::with_prelude) and call its functions.
--
-- fair_purge(queue, timeouts, alive, now, keep) drops the dead waiters at the head of a fair
-- lock's queue and returns the head left (false: none) and whether it dropped any. A waiter is
-- dead when its Redisson timeout (`timeouts`, epoch ms) has passed, Redisson's rule for every
-- waiter, or, for a ferrisson waiter, when its liveness deadline in `alive` [ext] has passed (it
-- calls again every heartbeat while it lives). `keep` is never dropped (the caller: it is
-- calling, so it is alive).
local function fair_purge(queue, timeouts, alive, now, keep)
  local dropped = false
  while true do
    local head = redis.call('lindex', queue, 0)
    if not head or head == keep then
      return head, dropped
    end
    local timeout = tonumber(redis.call('zscore', timeouts, head))
    local live = tonumber(redis.call('zscore', alive, head))
    if timeout and timeout > now and (not live or live > now) then
      return head, dropped
    end
    redis.call('lpop', queue)
    redis.call('zrem', timeouts, head)
    redis.call('zrem', alive, head)
    dropped = true
  end
end
