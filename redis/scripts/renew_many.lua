-- renew_many.lua: renew.lua for several holds on one server, in one call
-- (a Locker's renewal of the holds that are due together).
-- KEYS  renew.lua's three keys for each hold, hold after hold
-- ARGV  renew.lua's two arguments for each hold, in the same order
-- Returns renew.lua's answer for each hold (1 extended, 0 gone), in order.
local keys, argv = KEYS, ARGV
local function renew(KEYS, ARGV)
-- body
end
local out = {}
for i = 1, #keys / 3 do
  out[i] = renew({keys[3 * i - 2], keys[3 * i - 1], keys[3 * i]}, {argv[2 * i - 1], argv[2 * i]})
end
return out
