-- release.lua: free the lock if this hold still has it, and wake the next waiter.
-- KEYS[1]  lock key
-- KEYS[2]  queue (fair mode; absent otherwise)
-- KEYS[3]  deadlines (fair mode; absent otherwise)
-- ARGV[1]  hold id
-- ARGV[2]  wake-up channel
-- Returns 1 when released, 0 when the hold was already gone.
if redis.call('get', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('del', KEYS[1])
-- No fair queue on this name (the usual case outside fair mode): wake
-- every waiter and skip the queue work.
if redis.call('exists', KEYS[2]) == 0 then
  redis.call('publish', ARGV[2], '')
  return 1
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for _, w in ipairs(redis.call('zrangebyscore', KEYS[3], '-inf', now)) do
  redis.call('zrem', KEYS[2], w)
  redis.call('zrem', KEYS[3], w)
end
-- Fair mode names the next waiter so only it wakes; '' wakes every waiter.
redis.call('publish', ARGV[2], redis.call('zrange', KEYS[2], 0, 0)[1] or '')
return 1
