-- acquire.lua: take the lock if it is free (non-fair mode, and each RedLock master).
-- KEYS[1]  lock key: holds the unique id of the current hold, with a PX expiry
-- KEYS[2]  fencing counter: persistent on purpose, so tokens keep rising
-- KEYS[3]  fair queue of the name (see fair_acquire.lua)
-- KEYS[4]  fair waiters' place deadlines, scored by server time in ms
-- KEYS[5]  readers and permits, scored by lease expiry (see lib.lua)
-- KEYS[6]  their tokens
-- KEYS[7]  waiters (non-fair mode): hold ids by arrival, woken one at a
--          time by release.lua
-- KEYS[8]  reserved (non-fair mode): the id of a waiter that waited too
--          long, for whom a release keeps the free name a moment (PX)
-- ARGV[1]  hold id, unique per acquisition
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  '1' when the caller waits if refused: it joins the waiters
--          (absent: a single try); '2' for a RedLock waiter that holds a
--          quorum already and was refused here (the holder's release had
--          not landed yet): it takes the name if it is free by now, and
--          leaves the waiters (and a name kept for it) if not
-- ARGV[4]  how long the waiters key lives unrefreshed, in milliseconds
-- ARGV[5]  the caller's place among the waiters from an earlier try, or
--          '0': a refused waiter keeps its place, a granted one leaves
-- ARGV[6]  the id it waits under, if not ARGV[1] (RedLock: a new hold id
--          each round, one place throughout)
-- Returns {1, token} when acquired, {0, pttl of the current holder} when
-- not ({0, pttl, place} when it joined the waiters), {-1, limit} when the
-- name is held or awaited with another limit (permits: a writer counts as
-- limit 1).
--
-- A run that finds its own id on the key is a retry of this acquisition
-- whose first run took the lock but lost its answer (go-redis retries a
-- request after a network error): it is answered as granted, with the
-- token that run took (no grant can have followed it while the key held
-- it) and the lease counted again from now.
--
-- A fair client waiting in line keeps its place against non-fair clients
-- too: a free lock with a live queue is not taken (pttl 0 says "free, but
-- others go first"). So do readers and permits. One EXISTS over the three
-- keys keeps the free path at the same cost. The non-fair waiters do not
-- hold the name back from anyone (they only ask to be woken), except one
-- that waited too long: a release keeps the name for it a moment.
if redis.call('exists', KEYS[1], KEYS[3], KEYS[5], KEYS[8]) > 0 then
  -- refused answers a try that did not take the lock. A waiter joins the
  -- waiters, its place the server's time in microseconds (arrival order,
  -- across the set's emptying), or keeps the place it had; the set lives
  -- as long as its longest-lived waiter may go without trying again.
  local function refused(pttl)
    if ARGV[3] == '2' then
      redis.call('zrem', KEYS[7], ARGV[6])
      if redis.call('get', KEYS[8]) == ARGV[6] then redis.call('del', KEYS[8]) end
      return {0, pttl}
    end
    if ARGV[3] ~= '1' then return {0, pttl} end
    local place = tonumber(ARGV[5])
    if place == 0 then
      local t = redis.call('time')
      place = tonumber(t[1]) * 1000000 + tonumber(t[2])
    end
    redis.call('zadd', KEYS[7], string.format('%.0f', place), ARGV[6] or ARGV[1]) -- every digit: a number would go as %.14g
    if redis.call('pttl', KEYS[7]) < tonumber(ARGV[4]) then
      redis.call('pexpire', KEYS[7], ARGV[4])
    end
    return {0, pttl, place}
  end
  local holder = redis.call('get', KEYS[1])
  if holder == ARGV[1] then
    redis.call('pexpire', KEYS[1], ARGV[2])
    if ARGV[5] and ARGV[5] ~= '0' then
      redis.call('zrem', KEYS[7], ARGV[6] or ARGV[1])
    end
    return {1, tonumber(redis.call('get', KEYS[2]))}
  end
  if holder then
    return refused(redis.call('pttl', KEYS[1]))
  end
  local t = redis.call('time')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  -- Readers or permits: drop those whose lease is over; a live permit is
  -- another limit, a live reader makes the writer wait.
  for _, h in ipairs(redis.call('zrangebyscore', KEYS[5], '-inf', now)) do
    redis.call('zrem', KEYS[5], h)
    redis.call('zrem', KEYS[6], h)
  end
  local first = redis.call('zrange', KEYS[5], 0, 0, 'WITHSCORES')
  if first[1] then
    local n = string.match(first[1], '/X(%d+)%.?%d*$')
    if n then return {-1, tonumber(n)} end
    return refused(tonumber(first[2]) - now)
  end
  redis.call('del', KEYS[6])
  local live = redis.call('zrangebyscore', KEYS[4], now, '+inf', 'LIMIT', 0, 1)[1]
  if live then
    local n = string.match(live, '/X(%d+)%.?%d*$')
    if n then return {-1, tonumber(n)} end
    return refused(0)
  end
  local kept = redis.call('get', KEYS[8])
  if kept and kept ~= (ARGV[6] or ARGV[1]) then
    return refused(redis.call('pttl', KEYS[8]))
  end
  if kept then redis.call('del', KEYS[8]) end
end
local token = redis.call('incr', KEYS[2])
redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
if ARGV[5] and ARGV[5] ~= '0' then
  redis.call('zrem', KEYS[7], ARGV[6] or ARGV[1])
end
return {1, token}
