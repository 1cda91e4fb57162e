-- ferrisson script
-- operation: fair_lock/inspect
-- protocol: 1
-- [ext] Reads a fair lock (Redisson's RedissonFairLock layout) without changing anything (its
-- KindInspection: Client::inspect, the `ferrisson` command-line tool): its holds, and its
-- queue of waiters with their timeouts and liveness deadlines. It starts with
-- core/inspect_prelude.
-- KEYS[1] the lock hash (every other key is derived from it, in its slot)
-- ARGV[1] the most queued waiters listed
-- ARGV[2] "1" when the caller named the kind: a lock hash with no queue beside it is then a
--         fair lock's (an idle fair lock and a reentrant lock look alike)
-- returns false when the key holds anything but a lock hash (every field an owner holding a
--   positive count), or, the kind not named, when no queue stands beside it; else facts, each
--   a list of strings whose first names it: {'type', t}, {'pttl', ms}, {'now', ms},
--   {'field', owner, count} each hold, {'queue_length', n} and
--   {'queued', owner, timeout ms or '', liveness deadline ms or ''} each waiter, in order (the
--   queue outlives the hash: it is read when nothing is stored under the name too)
local name = KEYS[1]
local limit = tonumber(ARGV[1]) or 100
local named = ARGV[2] == '1'
local out, main = inspect_head(name)
if main ~= 'hash' and main ~= 'none' then
  return false
end
local all = {}
if main == 'hash' then
  all = inspect_lock_hash(name)
  if not all then
    return false
  end
end
local queue = inspect_prefixed(name, 'redisson_lock_queue')
local queued = redis.call('type', queue)['ok'] == 'list'
if not queued and not named then
  return inspect_elsewhere(out, main)
end
for i = 1, #all, 2 do
  inspect_fact(out, 'field', all[i], all[i + 1])
end
if queued then
  local timeouts = inspect_prefixed(name, 'redisson_lock_timeout')
  local alive = inspect_suffixed(name, 'alive')
  local timeouts_ok = redis.call('type', timeouts)['ok'] == 'zset'
  local alive_ok = redis.call('type', alive)['ok'] == 'zset'
  inspect_fact(out, 'queue_length', redis.call('llen', queue))
  for _, owner in ipairs(redis.call('lrange', queue, 0, limit - 1)) do
    local timeout = timeouts_ok and redis.call('zscore', timeouts, owner) or false
    local live = alive_ok and redis.call('zscore', alive, owner) or false
    inspect_fact(out, 'queued', owner, timeout or '', live or '')
  end
end
return out
