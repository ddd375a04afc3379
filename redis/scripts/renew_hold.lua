-- renew_hold.lua: not a script; the functions renew_many.lua and
-- renew_any_slot.lua share, put in at their line "-- functions".
-- renew(KEYS, ARGV) is renew.lua. renew_hold(k, id, ttl) renews the hold
-- id whose lock key is k for ttl milliseconds: a writer's hold (its id in
-- the lock key) at once; any other by renew.lua, with the name's holds and
-- tokens keys named from the lock key (keysFor: one base, then "lock",
-- "holds" and "tokens"), so that a call sends two strings per hold.
local function renew(KEYS, ARGV)
-- renew.lua
end
local function renew_hold(k, id, ttl)
  if redis.call('get', k) == id then
    redis.call('pexpire', k, ttl)
    return 1
  end
  local base = string.sub(k, 1, -5)
  return renew({k, base .. 'holds', base .. 'tokens'}, {id, ttl})
end
