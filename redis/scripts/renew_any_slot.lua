#!lua flags=allow-cross-slot-keys
-- renew_any_slot.lua: renew_many.lua for the holds of several names whose
-- slots one Redis Cluster master serves, in one call (Redis 7). A script's
-- declared keys must share one slot, so only the first hold's lock key is
-- declared: the call is routed by it. The flag above lets the script reach
-- the other holds' keys, in any slot this master serves; a key whose slot
-- is another node's, or is being moved away, fails the whole call ("non
-- local key"), never reads as missing, so a moved hold is not taken for
-- gone: the client renews such holds again one call each.
-- KEYS[1]  the first hold's lock key
-- ARGV[1]  lease in milliseconds
-- ARGV     then, for each hold: its lock key, then its id
-- Holds that are not a writer's are renewed as renew_many.lua does.
-- Returns renew.lua's answer for each hold (1 extended, 0 gone), in order.
local argv = ARGV
local function renew(KEYS, ARGV)
-- body
end
local ttl, out = argv[1], {}
for i = 1, (#argv - 1) / 2 do
  local k, id = argv[2 * i], argv[2 * i + 1]
  if redis.call('get', k) == id then
    redis.call('pexpire', k, ttl)
    out[i] = 1
  else
    local base = string.sub(k, 1, -5)
    out[i] = renew({k, base .. 'holds', base .. 'tokens'}, {id, ttl})
  end
end
return out
