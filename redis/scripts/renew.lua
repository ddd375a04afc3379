-- renew.lua: extend the lease if this hold is still there.
-- KEYS[1]  lock key
-- KEYS[2]  readers and permits, scored by lease expiry (see lib.lua)
-- KEYS[3]  their tokens
-- ARGV[1]  hold id
-- ARGV[2]  lease in milliseconds
-- Returns 1 when extended, 0 when the hold was already gone.
if redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 1
end
-- A reader or a permit (or a writer that turned reader): a lease that
-- ran out is gone, even if no script pruned it yet.
local expiry = redis.call('zscore', KEYS[2], ARGV[1])
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if not expiry or tonumber(expiry) <= now then
  return 0
end
redis.call('zadd', KEYS[2], now + tonumber(ARGV[2]), ARGV[1])
local latest = redis.call('zrange', KEYS[2], -1, -1, 'WITHSCORES')[2]
redis.call('pexpireat', KEYS[2], latest)
redis.call('pexpireat', KEYS[3], latest)
return 1
