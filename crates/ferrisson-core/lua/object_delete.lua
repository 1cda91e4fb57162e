-- ferrisson script
-- operation: core/object_delete
-- protocol: 1
-- Delete a synchronizer (Redisson's RObject delete): its state keys and its counters, then wake
-- its waiters so that they look again; a main key holding someone else's data is refused.
-- KEYS    the state keys (the main key first), then the counters (kept through expire, deleted
--         here: a fencing counter), then the channel when ARGV[4] is not ""
-- ARGV[1] what the main key must hold, as for core/object_expire
-- ARGV[2] how many state keys
-- ARGV[3] how many counters
-- ARGV[4] publish command ("publish", "spublish"), or "" to publish nothing
-- ARGV[5] the message published when something was deleted
-- returns 1 when any state key was deleted, else 0; WRONGTYPE error for a foreign main key
--         (nothing deleted)
local foreign = foreign_object(KEYS[1], ARGV[1])
if foreign then
  return foreign
end
local state, counters = tonumber(ARGV[2]), tonumber(ARGV[3])
local deleted = redis.call('del', unpack(KEYS, 1, state))
if counters > 0 then
  redis.call('del', unpack(KEYS, state + 1, state + counters))
end
if deleted > 0 and ARGV[4] ~= '' then
  redis.call(ARGV[4], KEYS[state + counters + 1], ARGV[5])
end
if deleted > 0 then
  return 1
end
return 0
