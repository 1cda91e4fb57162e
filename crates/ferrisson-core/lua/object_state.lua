-- ferrisson script
-- operation: core/object_state
-- protocol: 1
-- Read a synchronizer's main key without changing anything (Redisson's isExists,
-- remainTimeToLive, isLocked): whether it exists, its time to live, and one field of its hash,
-- refusing a key that holds someone else's data as core/object_expire does, so that a user's
-- string or hash never reads as a lock held or a semaphore set.
-- KEYS[1] the main key
-- ARGV[1] what it must hold, as for core/object_expire
-- ARGV[2] a hash field to read ("" for none)
-- returns {1 when it exists else 0, PTTL (-1: no expiry, -2: missing), the field's value or "",
--         the hash's number of fields when a field is asked for (else 0)}; WRONGTYPE error for a
--         foreign key
local foreign = foreign_object(KEYS[1], ARGV[1])
if foreign then
  return foreign
end
local field, fields = '', 0
if ARGV[2] ~= '' then
  field = redis.call('hget', KEYS[1], ARGV[2]) or ''
  fields = redis.call('hlen', KEYS[1])
end
return {redis.call('exists', KEYS[1]), redis.call('pttl', KEYS[1]), field, fields}
