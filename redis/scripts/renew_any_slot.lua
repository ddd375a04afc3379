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
-- Each hold is renewed by renew_hold.lua's renew_hold.
-- Returns renew.lua's answer for each hold (1 extended, 0 gone), in order.
local argv = ARGV
-- functions
local ttl, out = argv[1], {}
for i = 1, (#argv - 1) / 2 do
  out[i] = renew_hold(argv[2 * i], argv[2 * i + 1], ttl)
end
return out
