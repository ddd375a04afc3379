-- proclaim.lua: replace a candidacy's value, if it still holds the name.
-- KEYS[1]  lock key
-- KEYS[2]  values: candidacy ids to their values (elect.lua)
-- ARGV[1]  hold id
-- ARGV[2]  the new value
-- ARGV[3]  wake-up channel
-- Returns 1 when replaced, 0 when the hold no longer holds the name (its
-- lease ran out, or it was released or forced out: another's, or none).
--
-- HSET keeps the hash's expiry, and the lock key is not touched: the
-- lease stays what the last renewal made it.
if redis.call('get', KEYS[1]) ~= ARGV[1] or redis.call('hexists', KEYS[2], ARGV[1]) == 0 then
  return 0
end
redis.call('hset', KEYS[2], ARGV[1], ARGV[2])
redis.call('publish', ARGV[3], '~elect')
return 1
