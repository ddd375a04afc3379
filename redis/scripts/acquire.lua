-- acquire.lua: take the lock if it is free (non-fair mode, and each RedLock master).
-- KEYS[1]  lock key: holds the unique id of the current hold, with a PX expiry
-- KEYS[2]  fencing counter: persistent on purpose, so tokens keep rising
-- KEYS[3]  fair queue of the name (see fair_acquire.lua)
-- KEYS[4]  fair waiters' place deadlines, scored by server time in ms
-- ARGV[1]  hold id, unique per acquisition
-- ARGV[2]  lease in milliseconds
-- Returns {1, token} when acquired, {0, pttl of the current holder} when not.
--
-- A run that finds its own id on the key is a retry of this acquisition
-- whose first run took the lock but lost its answer (go-redis retries a
-- request after a network error): it is answered as granted, with the
-- token that run took (no grant can have followed it while the key held
-- it) and the lease counted again from now.
--
-- A fair client waiting in line keeps its place against non-fair clients
-- too: a free lock with a live queue is not taken (pttl 0 says "free, but
-- others go first"). One EXISTS over both keys keeps the free path at the
-- same cost.
if redis.call('exists', KEYS[1], KEYS[3]) > 0 then
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
  if #redis.call('zrangebyscore', KEYS[4], now, '+inf', 'LIMIT', 0, 1) > 0 then
    return {0, 0}
  end
end
local token = redis.call('incr', KEYS[2])
redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1, token}
