-- ferrisson script
-- operation: core/object_expire
-- protocol: 1
-- Set or clear the expiry of every key a synchronizer keeps its state in (Redisson's
-- RExpirable expire / clearExpire), refusing a main key that holds someone else's data.
-- KEYS    the object's state keys, the main key first
-- ARGV[1] what the main key must hold: "lock" (a reentrant, fair or spin lock's hash), "rwlock"
--         (a read-write lock's hash), "count" (a string holding an integer: semaphores,
--         latch), "value" (a string), "numbers:<fields>" (a hash of numbers under those
--         field names only: a rate limiter's settings)
-- ARGV[2] "pexpire" or "persist"
-- ARGV[3] the time to live in milliseconds (read by "pexpire")
-- returns 1 when any key got (or lost) an expiry, else 0; WRONGTYPE error for a foreign main
--         key (nothing changed)
local foreign = foreign_object(KEYS[1], ARGV[1])
if foreign then
  return foreign
end
local changed = 0
for i = 1, #KEYS do
  local done
  if ARGV[2] == 'persist' then
    done = redis.call('persist', KEYS[i])
  else
    done = redis.call('pexpire', KEYS[i], ARGV[3])
  end
  if done == 1 then
    changed = 1
  end
end
return changed
