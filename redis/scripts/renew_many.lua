-- renew_many.lua: renew.lua for several holds of one lease length on one
-- server, in one call (a Locker's renewal of the holds that are due
-- together).
-- KEYS     each hold's lock key
-- ARGV[1]  lease in milliseconds
-- ARGV     then each hold's id, in the order of KEYS
-- Each hold is renewed by renew_hold.lua's renew_hold.
-- Returns renew.lua's answer for each hold (1 extended, 0 gone), in order.
local keys, argv = KEYS, ARGV
-- functions
local ttl, out = argv[1], {}
for i = 1, #keys do
  out[i] = renew_hold(keys[i], argv[i + 1], ttl)
end
return out
