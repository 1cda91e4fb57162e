-- ferrisson script
-- operation: core/release_prelude
-- protocol: 1
-- A fragment, not run alone: the release scripts of the locks kept in a hash (the reentrant,
-- spin, fair and read-write locks) start with it, after core/lock_prelude and
-- core/record_prelude (Script::with_two_preludes), and call its functions.
-- docs/protocol.md, "[ext] Retries".
--
-- A release records its outcome ("<code>:<token>") in the client's record on the lock
-- (core/record_prelude): one key per client and lock, its slots reused, instead of a latch key
-- per release (Redisson's redisson_unlock_latch:{name}:<request id>), created and expired,
-- which cost Redis more than the release itself.
--
-- release_recorded(record, slot, seq) is what the record says a copy of this release did
-- already: {code, token}; nil when the record does not name the call (it did not run, or Redis
-- lost it with the lock in a restart or failover: the release runs now, and finds what is
-- left). Every copy asks, not only a resend (flag "r"): a copy left on a connection the client
-- gave up on can reach Redis after a resend ran, and would release a second time (a reentrant
-- hold one count lower, or an owner's next hold freed).
local function release_recorded(record, slot, seq)
  local state, result = record_state(record, slot, seq)
  if state ~= 'ran' then
    return nil
  end
  local sep = string.find(result, ':', 1, true)
  if not sep then
    return nil
  end
  return {tonumber(string.sub(result, 1, sep - 1)), tonumber(string.sub(result, sep + 1))}
end

-- release_record(record, slot, seq, flags, code, token) records a release's outcome. A token
-- of 0 (every release but a fenced hand-off) needs no number formatting.
local function release_record(record, slot, seq, flags, code, token)
  if token == 0 then
    record_mark(record, slot, seq, code .. ':0', flags)
  else
    record_mark(record, slot, seq, code .. ':' .. string.format('%.0f', token), flags)
  end
end
