-- renew_many.lua: renew.lua for several holds of one lease on one server,
-- in one call (a Locker's renewal of the holds that are due together).
-- KEYS     each hold's lock key
-- ARGV[1]  lease in milliseconds
-- ARGV     then each hold's id, in the order of KEYS
-- A writer's hold (its id in the lock key) is renewed here; any other
-- runs renew.lua, with the name's holds and tokens keys named from its
-- lock key (keysFor: one base, then "lock", "holds" and "tokens"), so a
-- call sends two strings per hold, not five.
-- Returns renew.lua's answer for each hold (1 extended, 0 gone), in order.
local keys, argv = KEYS, ARGV
local function renew(KEYS, ARGV)
-- body
end
local ttl, out = argv[1], {}
for i = 1, #keys do
  local k, id = keys[i], argv[i + 1]
  if redis.call('get', k) == id then
    redis.call('pexpire', k, ttl)
    out[i] = 1
  else
    local base = string.sub(k, 1, -5)
    out[i] = renew({k, base .. 'holds', base .. 'tokens'}, {id, ttl})
  end
end
return out
