-- release.lua: free a hold (a writer's, a reader's or a permit's) if it is
-- still there, and hand the name on. lib.lua's helpers go in at the line
-- "-- lib.lua".
-- KEYS[1]  lock key
-- KEYS[2]  queue (fair mode; absent otherwise)
-- KEYS[3]  deadlines (fair mode; absent otherwise)
-- KEYS[4]  fencing counter
-- KEYS[5]  readers and permits, scored by lease expiry
-- KEYS[6]  their tokens
-- KEYS[7]  waiters (non-fair mode): ids by arrival, woken one at a time
-- KEYS[8]  reserved (non-fair mode): a waiter the name is kept for a moment
-- KEYS[9]  records of forced releases (a forced release only; absent otherwise)
-- ARGV[1]  hold id
-- ARGV[2]  wake-up channel
-- ARGV[3]  a forced release: its record (JSON)
-- ARGV[4]  a forced release: how long records are kept, in milliseconds
-- ARGV[5]  'quiet': wake nobody (RedLock's undo of a round that failed:
--          a master it frees alone grants nobody a quorum);
--          'registered': every waiter of this name is in the waiters or
--          the fair queue (one server or a Cluster, not a candidacy), so
--          with none there nobody is woken; absent (RedLock, a candidacy,
--          a forced release): with none there, "" is published (everyone
--          tries), which an election's observers listen for
-- Returns 1 when released, 0 when the hold was already gone.
--
-- The writer's release with no fair queue and no waiter (a plain Unlock)
-- comes first and returns before lib.lua's helpers are even defined: the
-- mutex's release costs what it did before readers and permits. With
-- 'registered' it sends no message: a message nobody needs still costs
-- the server, and on a Cluster every node (classic pub/sub goes to all of
-- them over the cluster bus).
if not KEYS[9] and redis.call('get', KEYS[1]) == ARGV[1] and redis.call('exists', KEYS[2], KEYS[7]) == 0 then
  redis.call('del', KEYS[1])
  if ARGV[5] ~= 'quiet' and ARGV[5] ~= 'registered' then
    redis.call('publish', ARGV[2], '')
  end
  return 1
end
-- lib.lua
local k = {lock = KEYS[1], queue = KEYS[2], deadlines = KEYS[3], fence = KEYS[4],
  holds = KEYS[5], tokens = KEYS[6], waiters = KEYS[7], reserved = KEYS[8]}
local writer = redis.call('get', k.lock) == ARGV[1]
local now
if not writer then
  -- A reader or a permit, or a writer that turned reader.
  now = servertime()
  prune(k.holds, k.tokens, now)
  if not redis.call('zscore', k.holds, ARGV[1]) then
    return 0
  end
end
-- A forced release leaves its record, scored by the server's time, in the
-- same script: whoever sees the lock free can see why.
if KEYS[9] then
  now = now or servertime()
  -- zrangebyscore and zrem, which the least-privilege ACL has already.
  for _, old in ipairs(redis.call('zrangebyscore', KEYS[9], '-inf', now - tonumber(ARGV[4]))) do
    redis.call('zrem', KEYS[9], old)
  end
  redis.call('zadd', KEYS[9], now, ARGV[3])
  redis.call('pexpire', KEYS[9], ARGV[4])
end
if writer then
  redis.call('del', k.lock)
else
  redis.call('zrem', k.holds, ARGV[1])
  redis.call('zrem', k.tokens, ARGV[1])
  settle(k.holds, k.tokens)
end
-- No fair queue on this name (the usual case outside fair mode): wake
-- the waiters that can come in now, and skip the queue work.
if redis.call('exists', k.queue) == 0 then
  if ARGV[5] == 'quiet' then return 1 end
  if writer then prune(k.holds, k.tokens, now or servertime()) end
  -- This hold's own id is no waiter's any more, whatever the set says: a
  -- try whose refusal joined it, then retried after a lost answer and
  -- granted (go-redis runs it again, its place unknown), left it there,
  -- and waking it would wake nobody and keep the name for nobody.
  redis.call('zrem', k.waiters, ARGV[1])
  wakewaiters(k, ARGV[2], ARGV[5] == 'registered')
  return 1
end
-- Fair mode: grant the name to the head of the queue here (every reader
-- at the head, as many permits as are free, or one writer once nobody
-- holds), so that it needs no second round trip: a waiter's id carries
-- its lease ("<random>.<ms>"), and the message carries its token. A head
-- that misses the message finds its grant at its next refresh of its
-- place.
now = now or servertime()
prunequeue(k.queue, k.deadlines, now)
prune(k.holds, k.tokens, now)
if handoff(k, ARGV[2], now) == 0 and redis.call('exists', k.queue) == 0 then
  wakewaiters(k, ARGV[2], ARGV[5] == 'registered')
end
return 1
