-- Package fence's guarded Redis write: checks a resource's fencing token,
-- records it, then applies the caller's writes, all in one script (one
-- EVALSHA), so that nothing runs between the check and the writes.
--
-- KEYS[1]: the token key (fence.RedisKeyPrefix .. resource), holding the
--   highest token seen, in decimal;
-- KEYS[2..]: the key of each write, in order.
-- ARGV[1]: the token offered, in canonical decimal (no sign, no leading 0);
-- ARGV[2..]: the writes, each as its command (SET, HSET, DEL, INCRBY), its
--   argument count n, and n arguments after the key.
--
-- Returns {1, token} when the token was at least the highest and the writes
-- ran; {0, highest} when it was below: nothing was written.
-- Tokens are compared as decimal strings (shorter is lower), not as Lua
-- numbers, which are doubles and lose precision above 2^53.

local allowed = {SET = true, HSET = true, DEL = true, INCRBY = true}

local function below(a, b)
  if #a ~= #b then
    return #a < #b
  end
  return a < b
end

local highest = redis.call('GET', KEYS[1])
if highest and below(ARGV[1], highest) then
  return {0, highest}
end

-- Check every write before running any: a script is not rolled back.
local i, k = 2, 2
while i <= #ARGV do
  if not allowed[ARGV[i]] then
    return redis.error_reply('fence: write command ' .. ARGV[i] .. ' not allowed')
  end
  i, k = i + 2 + tonumber(ARGV[i + 1]), k + 1
end
if k ~= #KEYS + 1 then
  return redis.error_reply('fence: ' .. (k - 2) .. ' writes for ' .. (#KEYS - 1) .. ' keys')
end

redis.call('SET', KEYS[1], ARGV[1])
i, k = 2, 2
while i <= #ARGV do
  local n = tonumber(ARGV[i + 1])
  redis.call(ARGV[i], KEYS[k], unpack(ARGV, i + 2, i + 1 + n))
  i, k = i + 2 + n, k + 1
end
return {1, ARGV[1]}
