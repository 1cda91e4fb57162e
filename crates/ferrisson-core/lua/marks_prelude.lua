-- ferrisson script
-- operation: core/marks_prelude
-- protocol: 1
-- A fragment, not run alone: core/record_prelude starts with it, and the lock kinds' acquires
-- start with it alone (Script::with_prelude), calling its functions.
-- docs/protocol.md, "[ext] Retry records".
--
-- A client's undone marks on an object [ext], suffixed(name, "undone") .. ":" .. the client id
-- in 32 hex digits: a STRING of ";<seq>@<server ms>;", one for each call of the client whose
-- copies must take nothing from now on. A copy of a call can reach Redis after the client moved
-- on: one left on a connection the client gave up on (the link failed after the request left)
-- can be read after the resend sent on the new connection ran, and after the release that
-- followed it. The permit kinds mark a try undone when its caller left before it ran; a lock's
-- resend marks its call as it runs (late_copy), so that a copy of it arriving later takes no
-- hold nobody holds.

-- record_ttl(flags) is the record's TTL a call's flags carry ("e<ms>": set it), or nil.
local function record_ttl(flags)
  return tonumber(string.match(flags, 'e(%d+)'))
end

-- was_undone(marks, seq): whether the undone marks read (nil or false: none) name call seq.
local function was_undone(marks, seq)
  return marks and string.find(marks, ';' .. seq .. '@', 1, true) ~= nil
end

-- mark_undone(undone, seq, ttl) marks call seq undone, dropping the marks older than `ttl`
-- milliseconds (10 min when nil; record_ttl reads it from a call's flags). A mark's time is the
-- server's clock in whole milliseconds, up to one behind the moment it was made: a mark is
-- dropped only once the clock has passed its time + TTL, never before a full TTL has gone by.
-- (It calls no other function: a script pays for each function it carries on every run.)
local function mark_undone(undone, seq, ttl)
  ttl = ttl or 600000
  local t = redis.call('time')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local kept = {}
  for mark, at in string.gmatch(redis.call('get', undone) or '', ';(%d+)@(%d+);') do
    if tonumber(at) + tonumber(ttl) >= now then
      kept[#kept + 1] = ';' .. mark .. '@' .. at .. ';'
    end
  end
  kept[#kept + 1] = ';' .. seq .. '@' .. string.format('%.0f', now) .. ';'
  redis.call('set', undone, table.concat(kept), 'px', ttl)
end

-- late_copy(undone, seq, resend) is true when this copy of the lock acquire `seq` must take
-- nothing: another copy of it was resent and ran, which marked it in the client's undone marks
-- `undone`. A resend (`resend` not nil) marks the call when it finds no mark, before it takes
-- anything: every copy of the call reaching Redis after it then takes nothing. A first send
-- marks nothing (only a resend knows that another copy may still be on its way), so the
-- uncontended acquire pays one read of a key that is missing (and two functions: it reads the
-- marks itself rather than through was_undone).
local function late_copy(undone, seq, resend)
  local marks = redis.call('get', undone)
  if marks and string.find(marks, ';' .. seq .. '@', 1, true) then
    return true
  end
  if resend then
    mark_undone(undone, seq)
  end
  return false
end
