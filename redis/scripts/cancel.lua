-- cancel.lua: leave the fair queue; if the lock is free, wake the new head.
-- KEYS[1]  lock key
-- KEYS[2]  queue
-- KEYS[3]  deadlines
-- ARGV[1]  waiter id
-- ARGV[2]  wake-up channel
-- Returns 1 if the waiter was in the queue, 0 if not.
local removed = redis.call('zrem', KEYS[2], ARGV[1])
redis.call('zrem', KEYS[3], ARGV[1])
if removed == 1 and redis.call('exists', KEYS[1]) == 0 then
  local head = redis.call('zrange', KEYS[2], 0, 0)[1]
  if head then
    redis.call('publish', ARGV[2], head)
  end
end
return removed
