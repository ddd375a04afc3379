-- acquire.lua: take the lock if it is free (non-fair mode, and each RedLock master).
-- KEYS[1]  lock key: holds the unique id of the current hold, with a PX expiry
-- KEYS[2]  fencing counter: persistent on purpose, so tokens keep rising
-- KEYS[3]  fair queue of the name (see fair_acquire.lua)
-- KEYS[4]  fair waiters' place deadlines, scored by server time in ms
-- KEYS[5]  readers and permits, scored by lease expiry (see lib.lua)
-- KEYS[6]  their tokens
-- ARGV[1]  hold id, unique per acquisition
-- ARGV[2]  lease in milliseconds
-- Returns {1, token} when acquired, {0, pttl of the current holder} when
-- not, {-1, limit} when the name is held or awaited with another limit
-- (permits: a writer counts as limit 1).
--
-- A run that finds its own id on the key is a retry of this acquisition
-- whose first run took the lock but lost its answer (go-redis retries a
-- request after a network error): it is answered as granted, with the
-- token that run took (no grant can have followed it while the key held
-- it) and the lease counted again from now.
--
-- A fair client waiting in line keeps its place against non-fair clients
-- too: a free lock with a live queue is not taken (pttl 0 says "free, but
-- others go first"). So do readers and permits. One EXISTS over the three
-- keys keeps the free path at the same cost.
if redis.call('exists', KEYS[1], KEYS[3], KEYS[5]) > 0 then
  local holder = redis.call('get', KEYS[1])
  if holder == ARGV[1] then
    redis.call('pexpire', KEYS[1], ARGV[2])
    return {1, tonumber(redis.call('get', KEYS[2]))}
  end
  if holder then
    return {0, redis.call('pttl', KEYS[1])}
  end
  local t = redis.call('time')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  -- Readers or permits: drop those whose lease is over; a live permit is
  -- another limit, a live reader makes the writer wait.
  for _, h in ipairs(redis.call('zrangebyscore', KEYS[5], '-inf', now)) do
    redis.call('zrem', KEYS[5], h)
    redis.call('zrem', KEYS[6], h)
  end
  local first = redis.call('zrange', KEYS[5], 0, 0, 'WITHSCORES')
  if first[1] then
    local n = string.match(first[1], '/X(%d+)%.?%d*$')
    if n then return {-1, tonumber(n)} end
    return {0, tonumber(first[2]) - now}
  end
  redis.call('del', KEYS[6])
  local live = redis.call('zrangebyscore', KEYS[4], now, '+inf', 'LIMIT', 0, 1)[1]
  if live then
    local n = string.match(live, '/X(%d+)%.?%d*$')
    if n then return {-1, tonumber(n)} end
    return {0, 0}
  end
end
local token = redis.call('incr', KEYS[2])
redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1, token}
