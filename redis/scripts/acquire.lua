-- acquire.lua: take the lock if it is free (non-fair mode, and each RedLock master).
-- KEYS[1]  lock key: holds the unique id of the current hold, with a PX expiry
-- KEYS[2]  fencing counter: persistent on purpose, so tokens keep rising
-- ARGV[1]  hold id, unique per acquisition
-- ARGV[2]  lease in milliseconds
-- Returns {1, token} when acquired, {0, pttl of the current holder} when not.
if redis.call('exists', KEYS[1]) == 1 then
  return {0, redis.call('pttl', KEYS[1])}
end
local token = redis.call('incr', KEYS[2])
redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1, token}
