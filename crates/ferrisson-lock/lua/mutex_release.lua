-- ferrisson script
-- operation: lock/mutex_release
-- protocol: 1
-- Release a lean mutex if the owner's token holds it, and, when someone waits, wake one waiter.
-- The hottest script of the mutex, kept to what a free needs (each key and argument costs Redis
-- about 0.3 us a call; a hand-off is lock/mutex_hand_off).
-- KEYS[1] the mutex
-- KEYS[2] the waiter marker and the release channel, one name,
--         prefixed("ferrisson_mutex__channel", name) (keys and channels are apart in Redis): a
--         waiter's failed try sets the key (lock/mutex_acquire), and only while it lives does a
--         release publish (a publish costs Redis more than the check, and a mutex nobody waits
--         for is the common case)
-- ARGV[1] owner, the token
-- ARGV[2] (optional) the publish command when it is not "publish" ("spublish")
-- ARGV[3] (optional) "1": publish even when no waiter is marked (the releasing client's own
--         waiters wait, which may not have marked)
-- returns 1 when freed with nobody marked waiting, {1, 0, subscribers the message reached} when
--         freed and published, -1 when another token holds it or none does (a resent release
--         whose first call freed it answers -1 too: the layout keeps no record of releases);
--         WRONGTYPE when the key holds no string
if redis.call('get', KEYS[1]) ~= ARGV[1] then
  return -1
end
redis.call('del', KEYS[1])
if not ARGV[3] and redis.call('exists', KEYS[2]) == 0 then
  return 1
end
return {1, 0, redis.call(ARGV[2] or 'publish', KEYS[2], '0')}
