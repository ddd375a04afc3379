-- release.lua: free the lock if this hold still has it, and hand it on.
-- KEYS[1]  lock key
-- KEYS[2]  queue (fair mode; absent otherwise)
-- KEYS[3]  deadlines (fair mode; absent otherwise)
-- KEYS[4]  fencing counter
-- KEYS[5]  records of forced releases (a forced release only; absent otherwise)
-- ARGV[1]  hold id
-- ARGV[2]  wake-up channel
-- ARGV[3]  a forced release: its record (JSON)
-- ARGV[4]  a forced release: how long records are kept, in milliseconds
-- Returns 1 when released, 0 when the hold was already gone.
if redis.call('get', KEYS[1]) ~= ARGV[1] then
  return 0
end
-- A forced release leaves its record, scored by the server's time, in the
-- same script: whoever sees the lock free can see why.
if KEYS[5] then
  local t = redis.call('time')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  -- zrangebyscore and zrem, which the least-privilege ACL has already.
  for _, old in ipairs(redis.call('zrangebyscore', KEYS[5], '-inf', now - tonumber(ARGV[4]))) do
    redis.call('zrem', KEYS[5], old)
  end
  redis.call('zadd', KEYS[5], now, ARGV[3])
  redis.call('pexpire', KEYS[5], ARGV[4])
end
-- No fair queue on this name (the usual case outside fair mode): wake
-- every waiter and skip the queue work.
if redis.call('exists', KEYS[2]) == 0 then
  redis.call('del', KEYS[1])
  redis.call('publish', ARGV[2], '')
  return 1
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for _, w in ipairs(redis.call('zrangebyscore', KEYS[3], '-inf', now)) do
  redis.call('zrem', KEYS[2], w)
  redis.call('zrem', KEYS[3], w)
end
local head = redis.call('zrange', KEYS[2], 0, 0)[1]
if not head then
  redis.call('del', KEYS[1])
  redis.call('publish', ARGV[2], '')
  return 1
end
-- Fair mode: grant the lock to the head of the queue here, so that it
-- needs no second round trip: its id carries its lease ("<random>.<ms>"),
-- and the message carries its token. A head that misses the message finds
-- the lock in its name at its next refresh of its place.
local lease = tonumber(string.match(head, '%.(%d+)$'))
-- Never past the head's place deadline: a waiter that crashed since its
-- last refresh must not keep the lock a full lease after that. (The head
-- counts its lease from that refresh, which set the deadline a lease
-- after it, so it never believes in more than the server grants.)
local deadline = tonumber(redis.call('zscore', KEYS[3], head) or '0')
if lease and deadline - now < lease then
  lease = deadline - now
end
if not lease or lease <= 0 then
  redis.call('del', KEYS[1])
  redis.call('publish', ARGV[2], head)
  return 1
end
redis.call('zrem', KEYS[2], head)
redis.call('zrem', KEYS[3], head)
local token = redis.call('incr', KEYS[4])
redis.call('set', KEYS[1], head, 'PX', lease)
redis.call('publish', ARGV[2], head .. ' ' .. token)
return 1
