-- ferrisson script
-- operation: expirable_semaphore/release
-- protocol: 1
-- Release permits by id, all or nothing (every id must be held and unexpired), or each one
-- held (Redisson's tryRelease(ids)). The release is recorded in the client's record
-- (core/record_prelude): a resend after a lost reply gets the first result.
-- KEYS[1] permit count. Derived from it, in its slot (each argument costs Redis about 0.2 us
--         per call): the permits taken, suffixed(name, "timeout"); the channel
--         prefixed("redisson_sc", name); the client's record [ext] (core/record_prelude)
-- ARGV[1] publish command ("publish")
-- ARGV[2] "all" (all or nothing) or "held" (each id held)
-- ARGV[3] the client id, 32 hex digits (its record)
-- ARGV[4] the release's slot in the record, ARGV[5] its sequence number
-- ARGV[6] flags: "r" a resend, "e<ms>" set the record's TTL ("": none)
-- ARGV[7 ..] permit ids, 16 raw bytes each
-- returns, for "all", the count after the release, or -i when the i-th id is not held
--         (unknown, released or expired; nothing was released); for "held", how many were
--         released
local base = tagged(KEYS[1])
local timeouts, record = base .. ':timeout', record_keys(KEYS[1], ARGV[3])
if string.find(ARGV[6], 'r', 1, true) then
  local state, result = record_state(record, ARGV[4], ARGV[5])
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
    local expiry = redis.call('zscore', timeouts, id)
    if expiry and tonumber(expiry) > now then
      result = result + redis.call('zrem', timeouts, id)
    end
  end
  if result > 0 then
    redis.call(ARGV[1], 'redisson_sc:' .. base, redis.call('incrby', KEYS[1], result))
  end
else
  for i = 7, #ARGV do
    local expiry = redis.call('zscore', timeouts, ARGV[i])
    if not expiry or tonumber(expiry) <= now then
      result = -(i - 6)
      break
    end
  end
  if not result then
    for i = 7, #ARGV do
      redis.call('zrem', timeouts, ARGV[i])
    end
    result = redis.call('incrby', KEYS[1], #ARGV - 6)
    redis.call(ARGV[1], 'redisson_sc:' .. base, result)
  end
end
record_mark(record, ARGV[4], ARGV[5], result, ARGV[6])
return result
