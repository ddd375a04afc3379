-- renew.lua: extend the lease if this hold still has the lock.
-- KEYS[1]  lock key
-- ARGV[1]  hold id
-- ARGV[2]  lease in milliseconds
-- Returns 1 when extended, 0 when the hold was already gone.
if redis.call('get', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('pexpire', KEYS[1], ARGV[2])
return 1
