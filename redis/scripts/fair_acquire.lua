-- fair_acquire.lua: take the lock in FIFO order, or wait in line (fair mode).
-- KEYS[1]  lock key
-- KEYS[2]  fencing counter (persistent on purpose)
-- KEYS[3]  queue: sorted set of waiter ids, scored by arrival order
-- KEYS[4]  deadlines: sorted set of waiter ids, scored by the server time (ms)
--          after which a waiter that stopped refreshing its place is pruned
-- KEYS[5]  readers and permits, scored by lease expiry (see lib.lua)
-- KEYS[6]  their tokens
-- ARGV[1]  hold id, unique per acquisition, ending in ".<lease ms>"
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  '1' to join (or stay in) the queue, '0' for a single try
-- ARGV[4]  waiter lease in milliseconds: how long a place is kept unrefreshed
-- Returns {1, token, 0} when acquired now; {1, token, 1} when a release
-- granted it to this waiter already (release.lua); {0, pttl of the holder,
-- queue position, fencing counter} when not; {-1, limit} when the name is
-- held or awaited by permits of that limit. (A grant message whose token
-- is not above that counter is older than this call: its lease may be
-- over, and the waiter ignores it.)
local holder = redis.call('get', KEYS[1])
if holder == ARGV[1] then
  return {1, tonumber(redis.call('get', KEYS[2]) or '0'), 1}
end
-- Free, nobody in line and no reader or permit (the uncontended case):
-- take it, and skip the queue work.
if not holder and redis.call('exists', KEYS[3], KEYS[5]) == 0 then
  local token = redis.call('incr', KEYS[2])
  redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return {1, token, 0}
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- Prune waiters that stopped refreshing their place (crashed clients),
-- and readers and permits whose lease is over.
for _, w in ipairs(redis.call('zrangebyscore', KEYS[4], '-inf', now)) do
  redis.call('zrem', KEYS[3], w)
  redis.call('zrem', KEYS[4], w)
end
for _, h in ipairs(redis.call('zrangebyscore', KEYS[5], '-inf', now)) do
  redis.call('zrem', KEYS[5], h)
  redis.call('zrem', KEYS[6], h)
end
-- A permit held or waiting is another limit (all of them have the same).
local first = redis.call('zrange', KEYS[5], 0, 0, 'WITHSCORES')
local head = redis.call('zrange', KEYS[3], 0, 0)[1]
for _, id in ipairs({first[1] or '', head or ''}) do
  local n = string.match(id, '/X(%d+)%.?%d*$')
  if n then return {-1, tonumber(n)} end
end
if not first[1] then
  redis.call('del', KEYS[6])
end

if not holder and not first[1] then
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
-- How long the holders may keep it: the writer's lease, or the first
-- reader's to run out.
local pttl = redis.call('pttl', KEYS[1])
if first[2] then pttl = tonumber(first[2]) - now end
if ARGV[3] == '0' then
  return {0, pttl, -1, 0}
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
return {0, pttl, redis.call('zrank', KEYS[3], ARGV[1]),
  tonumber(redis.call('get', KEYS[2]) or '0')}
