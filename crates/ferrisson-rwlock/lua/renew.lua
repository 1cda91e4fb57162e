-- ferrisson script
-- operation: rwlock/renew
-- protocol: 1
-- Watchdog batch renewal of read-write lock holds: for each key, if the owner field is still
-- there, extend the lock (never shortening it) and, for a reader, that owner's own hold leases
-- only [ext: Redisson renews every reader's, which keeps a dead reader alive].
-- KEYS[i] lock hash i
-- ARGV[1] lease in milliseconds
-- ARGV[i + 1] field of KEYS[i]: the owner (read holds) or "<owner>:write" (write holds)
-- returns an array: 1 where the holds were extended, 0 where the owner no longer holds them
local lease = tonumber(ARGV[1])
local renewed = {}
for i = 1, #KEYS do
  local ok = 0
  local key = KEYS[i]
  local field = ARGV[i + 1]
  if redis.call('type', key).ok == 'hash' and redis.call('hexists', key, field) == 1 then
    if redis.call('pttl', key) < lease then
      redis.call('pexpire', key, lease)
    end
    if string.sub(field, -6) ~= ':write' then
      -- suffixed(name, owner): the name's own hash tag, or {name}.
      local base = key
      if not string.find(key, '{', 1, true) then
        base = '{' .. key .. '}'
      end
      local count = tonumber(redis.call('hget', key, field)) or 0
      for n = 1, count do
        redis.call('pexpire', base .. ':' .. field .. ':rwlock_timeout:' .. n, lease)
      end
    end
    ok = 1
  end
  renewed[i] = ok
end
return renewed
