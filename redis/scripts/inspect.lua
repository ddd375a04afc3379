-- inspect.lua: one lock's state, read atomically, for Holders.
-- KEYS[1]  lock key
-- KEYS[2]  fencing counter
-- KEYS[3]  fair queue
-- Returns {holder value or false, pttl, fencing counter, waiters in the queue}.
return {redis.call('get', KEYS[1]), redis.call('pttl', KEYS[1]),
  tonumber(redis.call('get', KEYS[2]) or '0'), redis.call('zcard', KEYS[3])}
