-- fair_acquire.lua: take the lock in FIFO order, or wait in line (fair mode).
-- KEYS[1]  lock key
-- KEYS[2]  fencing counter (persistent on purpose)
-- KEYS[3]  queue: sorted set of waiter ids, scored by arrival order
-- KEYS[4]  deadlines: sorted set of waiter ids, scored by the server time (ms)
--          after which a waiter that stopped refreshing its place is pruned
-- ARGV[1]  hold id, unique per acquisition, ending in ".<lease ms>"
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  '1' to join (or stay in) the queue, '0' for a single try
-- ARGV[4]  waiter lease in milliseconds: how long a place is kept unrefreshed
-- Returns {1, token, 0} when acquired now; {1, token, 1} when a release
-- granted it to this waiter already (release.lua); {0, pttl of the holder,
-- queue position, fencing counter} when not. (A grant message whose token
-- is not above that counter is older than this call: its lease may be
-- over, and the waiter ignores it.)
local holder = redis.call('get', KEYS[1])
if holder == ARGV[1] then
  return {1, tonumber(redis.call('get', KEYS[2]) or '0'), 1}
end
-- Free and nobody in line (the uncontended case): take it, and skip the
-- queue work.
local queued = redis.call('exists', KEYS[3]) == 1
if not holder and not queued then
  local token = redis.call('incr', KEYS[2])
  redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return {1, token, 0}
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- Prune waiters that stopped refreshing their place: crashed clients.
if queued then
  for _, w in ipairs(redis.call('zrangebyscore', KEYS[4], '-inf', now)) do
    redis.call('zrem', KEYS[3], w)
    redis.call('zrem', KEYS[4], w)
  end
end

if not holder then
  local head = redis.call('zrange', KEYS[3], 0, 0)[1]
  if head == nil or head == ARGV[1] then
    if head then
      redis.call('zrem', KEYS[3], ARGV[1])
      redis.call('zrem', KEYS[4], ARGV[1])
    end
    local token = redis.call('incr', KEYS[2])
    redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
    return {1, token, 0}
  end
end
if ARGV[3] == '0' then
  return {0, redis.call('pttl', KEYS[1]), -1, 0}
end

if not redis.call('zscore', KEYS[3], ARGV[1]) then
  local last = redis.call('zrange', KEYS[3], -1, -1, 'WITHSCORES')
  local seq = 1
  if last[2] then seq = tonumber(last[2]) + 1 end
  redis.call('zadd', KEYS[3], seq, ARGV[1])
end
redis.call('zadd', KEYS[4], now + tonumber(ARGV[4]), ARGV[1])
-- The queue lives exactly as long as its longest-lived waiter.
local latest = redis.call('zrange', KEYS[4], -1, -1, 'WITHSCORES')[2]
redis.call('pexpireat', KEYS[3], latest)
redis.call('pexpireat', KEYS[4], latest)
return {0, redis.call('pttl', KEYS[1]), redis.call('zrank', KEYS[3], ARGV[1]),
  tonumber(redis.call('get', KEYS[2]) or '0')}
