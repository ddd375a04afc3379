-- cancel.lua: leave the fair queue, handing the name on to those the
-- waiter kept out (readers behind a writer, the next writer). lib.lua's
-- helpers go in at the line "-- lib.lua".
-- KEYS[1]  lock key
-- KEYS[2]  queue
-- KEYS[3]  deadlines
-- KEYS[4]  fencing counter
-- KEYS[5]  readers and permits, scored by lease expiry
-- KEYS[6]  their tokens
-- ARGV[1]  waiter id
-- ARGV[2]  wake-up channel
-- Returns 1 if the waiter was in the queue, 0 if not.
-- lib.lua
local k = {lock = KEYS[1], queue = KEYS[2], deadlines = KEYS[3], fence = KEYS[4],
  holds = KEYS[5], tokens = KEYS[6]}
local removed = redis.call('zrem', k.queue, ARGV[1])
redis.call('zrem', k.deadlines, ARGV[1])
if removed == 1 and redis.call('exists', k.lock) == 0 then
  local now = servertime()
  prunequeue(k.queue, k.deadlines, now)
  prune(k.holds, k.tokens, now)
  handoff(k, ARGV[2], now)
end
return removed
