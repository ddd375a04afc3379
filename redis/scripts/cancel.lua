-- cancel.lua: leave the fair queue, handing the name on to those the
-- waiter kept out (readers behind a writer, the next writer); or, for a
-- non-fair waiter, leave the waiters, passing on a wake-up it may have
-- been sent and not used. lib.lua's helpers go in at the line
-- "-- lib.lua".
-- KEYS[1]  lock key
-- KEYS[2]  queue
-- KEYS[3]  deadlines
-- KEYS[4]  fencing counter
-- KEYS[5]  readers and permits, scored by lease expiry
-- KEYS[6]  their tokens
-- KEYS[7]  waiters (non-fair mode)
-- KEYS[8]  reserved (non-fair mode)
-- ARGV[1]  waiter id
-- ARGV[2]  wake-up channel
-- ARGV[3]  '1' for a non-fair waiter
-- Returns 1 if the waiter was in the queue or among the waiters, 0 if not.
-- lib.lua
local k = {lock = KEYS[1], queue = KEYS[2], deadlines = KEYS[3], fence = KEYS[4],
  holds = KEYS[5], tokens = KEYS[6], waiters = KEYS[7], reserved = KEYS[8]}
if ARGV[3] == '1' then
  -- Not among the waiters any more: a release took it out to wake it. If
  -- the name is still free, the next waiter gets that wake-up instead.
  local removed = redis.call('zrem', k.waiters, ARGV[1])
  if redis.call('get', k.reserved) == ARGV[1] then
    redis.call('del', k.reserved) -- kept for it: no longer
  end
  if removed == 0 and redis.call('exists', k.lock, k.queue) == 0 then
    prune(k.holds, k.tokens, servertime())
    wakewaiters(k, ARGV[2])
  end
  return removed
end
local removed = redis.call('zrem', k.queue, ARGV[1])
redis.call('zrem', k.deadlines, ARGV[1])
if removed == 1 and redis.call('exists', k.lock) == 0 then
  local now = servertime()
  prunequeue(k.queue, k.deadlines, now)
  prune(k.holds, k.tokens, now)
  handoff(k, ARGV[2], now)
end
return removed
