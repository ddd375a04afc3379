-- inspect.lua: one lock's state, read atomically, for Holders.
-- KEYS[1]  lock key
-- KEYS[2]  fencing counter
-- KEYS[3]  fair queue
-- KEYS[4]  readers and permits, scored by lease expiry (see lib.lua)
-- KEYS[5]  their tokens
-- KEYS[6]  values: candidacy ids to their values (elect.lua)
-- Returns {writer's id or false, its pttl, fencing counter, waiters in the
-- queue, {id, ms left, token, ...} of each live reader or permit, the
-- writer's value if it is a candidacy or false}. (The EXISTS spares a
-- name that never held an election the HGET, which the least-privilege
-- ACL of locks alone does not grant.)
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local holds = {}
local all = redis.call('zrangebyscore', KEYS[4], '(' .. now, '+inf', 'WITHSCORES')
for i = 1, #all, 2 do
  holds[#holds + 1] = all[i]
  holds[#holds + 1] = tonumber(all[i + 1]) - now
  holds[#holds + 1] = tonumber(redis.call('zscore', KEYS[5], all[i]) or '0')
end
local writer = redis.call('get', KEYS[1])
local value = false
if writer and redis.call('exists', KEYS[6]) == 1 then
  value = redis.call('hget', KEYS[6], writer)
end
return {writer, redis.call('pttl', KEYS[1]),
  tonumber(redis.call('get', KEYS[2]) or '0'), redis.call('zcard', KEYS[3]), holds, value}
