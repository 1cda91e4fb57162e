-- ferrisson script
-- operation: core/client_record
-- protocol: 1
-- [ext] A client's record (docs/protocol.md, "[ext] Client records"): who the client is, for
-- operators, written with its expiry at once so that it never lives without one.
-- KEYS[1] ferrisson_client:<tag>
-- ARGV[1] time to live in ms
-- ARGV[2..] field, value, field, value, ...
-- returns 1; WRONGTYPE error when the key holds something else
redis.call('hset', KEYS[1], unpack(ARGV, 2))
redis.call('pexpire', KEYS[1], ARGV[1])
return 1
