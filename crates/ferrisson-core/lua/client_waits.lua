-- ferrisson script
-- operation: core/client_waits
-- protocol: 1
-- [ext] The waits in a client's record (docs/protocol.md, "[ext] Waits on record"): takes out
-- the waits that ended and writes those that began or changed, with the record's own fields
-- (a record lost meanwhile comes back whole) and its expiry, at once.
-- KEYS[1] ferrisson_client:<tag>
-- ARGV[1] time to live in ms
-- ARGV[2] how many fields to delete, n
-- ARGV[3..2+n] the fields to delete (wait:<id>)
-- ARGV[3+n..] field, value, field, value, ... (the record's fields, then waits)
-- returns 1; WRONGTYPE error when the key holds something else
local n = tonumber(ARGV[2])
if n > 0 then
    redis.call('hdel', KEYS[1], unpack(ARGV, 3, 2 + n))
end
if #ARGV >= 3 + n then
    redis.call('hset', KEYS[1], unpack(ARGV, 3 + n))
end
redis.call('pexpire', KEYS[1], ARGV[1])
return 1
