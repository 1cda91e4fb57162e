-- ferrisson script
-- operation: core/record_prelude
-- protocol: 1
-- A fragment, not run alone: the scripts of the permit kinds (the semaphore's, the
-- permit-expirable semaphore's) start with it (Script::with_prelude) and call its functions.
-- docs/protocol.md, "[ext] Retries".
--
-- A client's record on an object [ext], suffixed(name, "record") .. ":" .. the client id in 32
-- hex digits: a hash of slot -> "<seq>:<result>", which of the client's calls on the object ran,
-- so that a call resent after a lost reply counts once and a call whose caller left can be
-- undone once. One key per client and object, its fields overwritten: a fresh latch key per
-- call, created and expired, cost Redis more than the call's own work. A call takes a slot the
-- client frees only once the call's outcome is settled (answered, or resent and undone), and a
-- sequence number the client never hands out twice, so a slot names the call whose number it
-- holds and no other. A field is new when the client uses a slot for the first time, or the
-- record was lost or expired: the record's TTL is set then, and whenever the client asks
-- (flag "e", at least every half TTL while it calls), so that it outlives every call that may
-- be resent and goes once the client stops calling.
--
-- A client's undone marks on an object [ext], suffixed(name, "undone") .. ":" .. the client id:
-- ";<seq>@<server ms>;" for each call undone before it ran, so that the call, should it still
-- reach Redis (from a connection the client gave up on), takes nothing. Marks older than the
-- TTL are dropped when another is added.

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

-- record_mark(record, slot, seq, result, ttl, flags) records that call seq ran with `result`
-- (a string, "" for none, or an integer); `result` "-" records it undone.
local function record_mark(record, slot, seq, result, ttl, flags)
  if type(result) == 'number' then
    -- '%.0f': Lua's default number format would round a 16-digit integer.
    result = string.format('%.0f', result)
  end
  local value = seq .. ':' .. result
  if result == '-' then
    value = '-' .. seq .. ':'
  end
  if redis.call('hset', record, slot, value) == 1 or string.find(flags, 'e', 1, true) then
    redis.call('pexpire', record, ttl)
  end
end

-- was_undone(marks, seq): whether the undone marks read (nil or false: none) name call seq.
local function was_undone(marks, seq)
  return marks and string.find(marks, ';' .. seq .. '@', 1, true) ~= nil
end

-- mark_undone(undone, seq, ttl) marks call seq undone, dropping the marks older than ttl.
local function mark_undone(undone, seq, ttl)
  local t = redis.call('time')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local kept = {}
  for mark, at in string.gmatch(redis.call('get', undone) or '', ';(%d+)@(%d+);') do
    if tonumber(at) > now - tonumber(ttl) then
      kept[#kept + 1] = ';' .. mark .. '@' .. at .. ';'
    end
  end
  kept[#kept + 1] = ';' .. seq .. '@' .. string.format('%.0f', now) .. ';'
  redis.call('set', undone, table.concat(kept), 'px', ttl)
end
