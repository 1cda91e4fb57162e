-- ferrisson script
-- operation: core/release_prelude
-- protocol: 1
-- A fragment, not run alone: the release scripts of the locks kept in a hash (the reentrant,
-- spin and fair locks) start with it, after core/lock_prelude (Script::with_prelude), and call
-- its functions. docs/protocol.md, "[ext] Retries".
--
-- A release that frees the lock, the hot path, records only its sequence number in the
-- client's latch for the lock (one key per client and lock, overwritten: a fresh key per
-- release, created and expired, was most of what Redis spent on a lock + unlock); any other
-- outcome, and a free while another release of the lock by the same client may still be
-- resent (flag "l"), goes to the request's own latch: the client's latch key with the request
-- id in place of the client id (both end in 32 hex digits).
--
-- release_resent(latch, request, seq, held) is what a resent release (flag "r") answers from
-- the records of the call it resends: {code, token} from the request's latch, 1 when the
-- client's latch holds its sequence number (it freed the lock), -2 when the owner holds nothing
-- and a later free by the same client overwrote that record (the script cannot tell a free
-- from a hold gone before); nil when nothing says the call ran (it runs now: if Redis lost it
-- with the lock, in a restart or failover, the owner holds nothing and is answered as such).
local function release_resent(latch, request, seq, held)
  local done = redis.call('get', string.sub(latch, 1, -33) .. request)
  if done then
    local sep = string.find(done, ':', 1, true)
    return {tonumber(string.sub(done, 1, sep - 1)), tonumber(string.sub(done, sep + 1))}
  end
  local freed = tonumber(redis.call('get', latch) or '0')
  if freed == tonumber(seq) then
    return 1
  end
  if not held and freed > tonumber(seq) then
    return -2
  end
  return nil
end

-- release_record(latch, request, seq, ttl, code, token, own) records a release's outcome for
-- ttl milliseconds: a free (code 1) in the client's latch as seq, unless `own` (flag "l"); any
-- other code, with its token, in the request's latch.
local function release_record(latch, request, seq, ttl, code, token, own)
  if code == 1 and not own then
    redis.call('set', latch, seq, 'px', ttl)
  else
    redis.call('set', string.sub(latch, 1, -33) .. request,
      code .. ':' .. string.format('%.0f', token), 'px', ttl)
  end
end
