-- ferrisson script
-- operation: expirable_semaphore/release
-- protocol: 1
-- Release permits by id, all or nothing (every id must be held and unexpired), or each one
-- held (Redisson's tryRelease(ids)). The release is recorded in the client's record
-- (core/record_prelude): a resend after a lost reply gets the first result.
-- KEYS[1] permit count
-- KEYS[2] permits taken, suffixed(name, "timeout")
-- KEYS[3] channel, prefixed("redisson_sc", name)
-- KEYS[4] the client's record on the semaphore [ext] (core/record_prelude)
-- ARGV[1] publish command ("publish")
-- ARGV[2] "all" (all or nothing) or "held" (each id held)
-- ARGV[3] the release's slot in the record, ARGV[4] its sequence number, ARGV[5] the record's
--         TTL in milliseconds, ARGV[6] flags: "r" a resend, "e" set the record's TTL ("": none)
-- ARGV[7 ..] permit ids, 16 raw bytes each
-- returns, for "all", the count after the release, or -i when the i-th id is not held
--         (unknown, released or expired; nothing was released); for "held", how many were
--         released
if string.find(ARGV[6], 'r', 1, true) then
  local state, result = record_state(KEYS[4], ARGV[3], ARGV[4])
  if state == 'ran' then
    return tonumber(result)
  end
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local result
if ARGV[2] == 'held' then
  result = 0
  for i = 7, #ARGV do
    local id = ARGV[i]
    local expiry = redis.call('zscore', KEYS[2], id)
    if expiry and tonumber(expiry) > now then
      result = result + redis.call('zrem', KEYS[2], id)
    end
  end
  if result > 0 then
    redis.call(ARGV[1], KEYS[3], redis.call('incrby', KEYS[1], result))
  end
else
  for i = 7, #ARGV do
    local expiry = redis.call('zscore', KEYS[2], ARGV[i])
    if not expiry or tonumber(expiry) <= now then
      result = -(i - 6)
      break
    end
  end
  if not result then
    for i = 7, #ARGV do
      redis.call('zrem', KEYS[2], ARGV[i])
    end
    result = redis.call('incrby', KEYS[1], #ARGV - 6)
    redis.call(ARGV[1], KEYS[3], result)
  end
end
record_mark(KEYS[4], ARGV[3], ARGV[4], result, ARGV[5], ARGV[6])
return result
