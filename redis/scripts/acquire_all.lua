-- acquire_all.lua: take every one of several locks in one step, or none
-- (non-fair mode: LockAll's one request, multi.go). For the i-th of n
-- names, KEYS[5i-4] .. KEYS[5i] are its
--   lock key, fencing counter, fair queue, readers and permits, reserved
-- (acquire.lua's KEYS[1], KEYS[2], KEYS[3], KEYS[5] and KEYS[8]).
-- ARGV[1]      lease in milliseconds
-- ARGV[1+i]    the i-th name's hold id, unique per acquisition
-- ARGV[1+n+i]  the i-th name's wake-up channel
-- Returns {1, token_1, ..., token_n} when every name was free and is now
-- held, each as acquire.lua takes one (the counter incremented, the id set
-- with the lease); {0} when any name is held or awaited, and then nothing
-- is taken.
--
-- A name is free as on acquire.lua's free path: none of its lock key, fair
-- queue, readers and permits, and reservation exists (a release keeps a
-- free name a moment for a waiter that waited too long: this request
-- never takes it from that waiter, as no other writer's does). Anything else (even readers whose
-- lease is over) is left to the per-name path, which sorts it out.
--
-- A run that finds its own ids on every lock key is a retry whose first
-- run took them all but lost its answer (go-redis retries after a network
-- error): it is answered as granted, as acquire.lua answers one. A retry
-- that finds only some of its ids (the others expired since) gives those
-- back, as release.lua's plain Unlock does, so that nothing is left.
local n = (#ARGV - 1) / 2
local free, own = true, 0
for i = 1, n do
  local k = 5 * (i - 1)
  if redis.call('exists', KEYS[k + 1], KEYS[k + 3], KEYS[k + 4], KEYS[k + 5]) > 0 then
    free = false
    if redis.call('get', KEYS[k + 1]) == ARGV[1 + i] then
      own = own + 1
    end
  end
end
local out = {1}
if free then
  for i = 1, n do
    local k = 5 * (i - 1)
    out[i + 1] = redis.call('incr', KEYS[k + 2])
    redis.call('set', KEYS[k + 1], ARGV[1 + i], 'PX', ARGV[1])
  end
  return out
end
if own == n then
  for i = 1, n do
    local k = 5 * (i - 1)
    redis.call('pexpire', KEYS[k + 1], ARGV[1])
    out[i + 1] = tonumber(redis.call('get', KEYS[k + 2]))
  end
  return out
end
for i = 1, n do
  local k = 5 * (i - 1)
  if own > 0 and redis.call('get', KEYS[k + 1]) == ARGV[1 + i] then
    redis.call('del', KEYS[k + 1])
    redis.call('publish', ARGV[1 + n + i], '')
  end
end
return {0}
