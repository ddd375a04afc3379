#!lua flags=allow-cross-slot-keys
-- renew_any_slot.lua: renew.lua for the holds of several names whose slots
-- one Redis Cluster master serves, in one call (Redis 7). A script's
-- declared keys must share one slot, so only the first hold's lock key is
-- declared: the call is routed by it. The flag above lets the script reach
-- the other holds' keys, in any slot this master serves; a key whose slot
-- is another node's, or is being moved away, fails the whole call ("non
-- local key"), never reads as missing, so a moved hold is not taken for
-- gone: the client renews such holds again one call each.
-- KEYS[1]  the first hold's lock key
-- ARGV     for each hold: renew.lua's three keys, then its two arguments
-- Returns renew.lua's answer for each hold (1 extended, 0 gone), in order.
local argv = ARGV
local function renew(KEYS, ARGV)
-- body
end
local out = {}
for i = 1, #argv / 5 do
  local b = 5 * (i - 1)
  out[i] = renew({argv[b + 1], argv[b + 2], argv[b + 3]}, {argv[b + 4], argv[b + 5]})
end
return out
