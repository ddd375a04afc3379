-- share.lua: turn a writer into a reader in place (a downgrade): its id
-- moves from the lock key to the readers, with its token, and readers
-- waiting behind it may come in. lib.lua's helpers go in at the
-- line "-- lib.lua".
-- KEYS[1]  lock key
-- KEYS[2]  fencing counter
-- KEYS[3]  queue (fair mode)
-- KEYS[4]  deadlines (fair mode)
-- KEYS[5]  readers and permits, scored by lease expiry
-- KEYS[6]  their tokens
-- ARGV[1]  hold id
-- ARGV[2]  lease in milliseconds, counted from now
-- ARGV[3]  the hold's token
-- ARGV[4]  wake-up channel
-- Returns 1 when the hold is a reader now (also when it already was: a
-- retry of a Share whose answer was lost), 0 when it is gone.
-- lib.lua
local k = {lock = KEYS[1], fence = KEYS[2], queue = KEYS[3], deadlines = KEYS[4],
  holds = KEYS[5], tokens = KEYS[6]}
local id = ARGV[1]
local now = servertime()
prune(k.holds, k.tokens, now)
if redis.call('get', k.lock) == id then
  redis.call('del', k.lock)
  redis.call('zadd', k.tokens, ARGV[3], id)
elseif not redis.call('zscore', k.holds, id) then
  return 0
end
redis.call('zadd', k.holds, now + tonumber(ARGV[2]), id)
settle(k.holds, k.tokens)
if redis.call('exists', k.queue) == 0 then
  redis.call('publish', ARGV[4], '')
  return 1
end
prunequeue(k.queue, k.deadlines, now)
handoff(k, ARGV[4], now)
return 1
