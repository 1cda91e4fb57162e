-- ferrisson script
-- operation: core/record_prelude
-- protocol: 1
-- A fragment, not run alone: the scripts of the permit kinds (the semaphore's, the
-- permit-expirable semaphore's) and the lock kinds' releases (through core/release_prelude)
-- start with it (Script::with_prelude) and call its functions. It starts with
-- core/marks_prelude (the undone marks), which the lock kinds' acquires start with alone.
-- docs/protocol.md, "[ext] Retries".
--
-- A client's record on an object [ext], suffixed(name, "record") .. ":" .. the client id in 32
-- hex digits: a hash of slot -> "<seq>:<result>", which of the client's calls on the object ran,
-- so that a call resent after a lost reply counts once and a call whose caller left can be
-- undone once. One key per client and object, its fields overwritten: a fresh latch key per
-- call, created and expired, cost Redis more than the call's own work. A call takes a slot the
-- client frees only once the call's outcome is settled (answered, or resent and undone), and a
-- sequence number the client never hands out twice, so a slot names the call whose number it
-- holds and no other. A call sets the record's TTL when its flags say so ("e<ms>": on a slot
-- the client never used, and at least every half TTL while it calls); a field new without it
-- (the record was lost or expired since) gets 10 min. So the record outlives every call that may
-- be resent and goes once the client stops calling. The client's undone marks on an object
-- (the permit-expirable semaphore's, the locks'): core/marks_prelude.

-- tagged(name) is `name` as keys::prefixed and keys::suffixed place it: as it is when it
-- carries a hash tag, else in braces, so that "<prefix>:" .. tagged(name) and tagged(name) ..
-- ":<suffix>" land in the name's slot. The permit scripts derive their other keys from the
-- count's name with it, rather than take them as arguments (each costs Redis about 0.2 us per
-- call).
local function tagged(name)
  if string.find(name, '{', 1, true) then
    return name
  end
  return '{' .. name .. '}'
end

-- record_keys(name, client) is the client's record on the object `name` and its undone marks.
local function record_keys(name, client)
  local base = tagged(name)
  return base .. ':record:' .. client, base .. ':undone:' .. client
end

-- record_state(record, slot, seq) is "ran" and the result the call recorded, "undone" when it
-- was undone after it ran, or nil when the record does not name the call.
local function record_state(record, slot, seq)
  local v = redis.call('hget', record, slot)
  if not v then
    return nil
  end
  local sep = string.find(v, ':', 1, true)
  if not sep then
    return nil
  end
  local head = string.sub(v, 1, sep - 1)
  if head == seq then
    return 'ran', string.sub(v, sep + 1)
  end
  if head == '-' .. seq then
    return 'undone'
  end
  return nil
end

-- record_mark(record, slot, seq, result, flags) records that call seq ran with `result` (a
-- string, "" for none, or an integer); `result` "-" records it undone. The TTL is set when the
-- flags carry one, and when the field is new without (the record was lost or expired since
-- the client last set it: 10 min then, well past the client's next "e", which comes within half
-- its TTL while it calls).
local function record_mark(record, slot, seq, result, flags)
  if type(result) == 'number' then
    -- '%.0f': Lua's default number format would round a 16-digit integer.
    result = string.format('%.0f', result)
  end
  local value = seq .. ':' .. result
  if result == '-' then
    value = '-' .. seq .. ':'
  end
  -- Most calls carry no flags: no pattern match for them (it cost 0.25 us a call).
  local ttl = flags ~= '' and record_ttl(flags) or nil
  if redis.call('hset', record, slot, value) == 1 and not ttl then
    ttl = 600000
  end
  if ttl then
    redis.call('pexpire', record, ttl)
  end
end
