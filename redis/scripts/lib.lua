-- lib.lua: helpers of the scripts that see readers and permits, put into
-- each at its line "-- lib.lua" (scripts.go); the mutex's acquire and
-- renew scripts inline the little they need, to keep their free path as
-- it was.
--
-- A name's keys (all in one hash tag): lock (the writer's id, PX lease),
-- fence (the token counter), queue and deadlines (fair mode's waiters),
-- waiters (non-fair mode's: ids by arrival, to wake one at a time), holds (reader and permit ids, scored by lease expiry in server ms) and
-- tokens (the same ids, scored by their token). A hold id ends in a kind
-- tag: none for a writer, "/S" for a reader, "/X<n>" for a permit of n
-- (then ".<lease ms>" in fair mode). An untagged id in holds is a writer
-- that turned reader (share.lua).

local function servertime()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- kind returns the mode of an id ('W' writer, 'S' reader, 'X' permit) and
-- its limit; inholds says the id is in holds, where an untagged id reads.
local function kind(id, inholds)
  local m, n = string.match(id, '/([SX])(%d*)%.?%d*$')
  if m == 'X' then return 'X', tonumber(n) end
  if m == 'S' or inholds then return 'S', 1 end
  return 'W', 1
end

-- prune drops holds whose lease is over (with their tokens) and returns
-- how many are left.
local function prune(holds, tokens, now)
  for _, h in ipairs(redis.call('zrangebyscore', holds, '-inf', now)) do
    redis.call('zrem', holds, h)
    redis.call('zrem', tokens, h)
  end
  local n = redis.call('zcard', holds)
  if n == 0 then redis.call('del', tokens) end
  return n
end

-- prunequeue drops waiters that stopped refreshing their place: crashed
-- clients.
local function prunequeue(queue, deadlines, now)
  for _, w in ipairs(redis.call('zrangebyscore', deadlines, '-inf', now)) do
    redis.call('zrem', queue, w)
    redis.call('zrem', deadlines, w)
  end
end

-- settle makes holds and tokens live exactly as long as the latest lease.
local function settle(holds, tokens)
  local latest = redis.call('zrange', holds, -1, -1, 'WITHSCORES')[2]
  if latest then
    redis.call('pexpireat', holds, latest)
    redis.call('pexpireat', tokens, latest)
  else
    redis.call('del', tokens)
  end
end

-- grant makes id a reader or permit until expiry, with the next token.
local function grant(holds, tokens, fence, id, expiry)
  local token = redis.call('incr', fence)
  redis.call('zadd', holds, expiry, id)
  redis.call('zadd', tokens, token, id)
  return token
end

-- heldlimit is the limit of the live holds and waiters of the name (they
-- all have the same), or nil if there are none. Call it pruned.
local function heldlimit(lock, holds, queue)
  if redis.call('exists', lock) == 1 then return 1 end
  local h = redis.call('zrange', holds, 0, 0)[1]
  if h then
    local _, n = kind(h, true)
    return n
  end
  local w = redis.call('zrange', queue, 0, 0)[1]
  if w then
    local _, n = kind(w, false)
    return n
  end
  return nil
end

-- leaseof is the lease a waiter asked for (its id's ".<ms>"), never past
-- its place deadline: a waiter that crashed since its last refresh must
-- not keep a hold a full lease after that. (It counts its lease from that
-- refresh, which set the deadline a lease after it.)
local function leaseof(deadlines, w, now)
  local lease = tonumber(string.match(w, '%.(%d+)$'))
  local deadline = tonumber(redis.call('zscore', deadlines, w) or '0')
  if lease and deadline - now < lease then lease = deadline - now end
  return lease
end

-- handoff grants the waiters at the head of the fair queue that the rule
-- admits now, each by a message "<id> <token>" on channel: every reader
-- up to the first writer; or as many permits as are free; or the writer
-- at the head, if nobody holds. Call it pruned, with the lock free.
-- Returns how many it granted.
local function handoff(k, channel, now)
  local held = redis.call('zcard', k.holds)
  local granted = 0
  while true do
    local w = redis.call('zrange', k.queue, 0, 0)[1]
    if not w then break end
    local m, limit = kind(w, false)
    if (m == 'W' and held > 0) or (m == 'X' and held >= limit) then break end
    local lease = leaseof(k.deadlines, w, now)
    redis.call('zrem', k.queue, w)
    redis.call('zrem', k.deadlines, w)
    if not lease or lease <= 0 then
      redis.call('publish', channel, w) -- let it find out for itself
    else
      local token
      if m == 'W' then
        token = redis.call('incr', k.fence)
        redis.call('set', k.lock, w, 'PX', lease)
      else
        token = grant(k.holds, k.tokens, k.fence, w, now + lease)
      end
      redis.call('publish', channel, w .. ' ' .. token)
      granted = granted + 1
      held = held + 1
      if m == 'W' then break end
    end
  end
  if granted > 0 then settle(k.holds, k.tokens) end
  return granted
end

-- joinwaiters puts a refused non-fair waiter among the waiters, at the
-- place it had (place > 0) or, new, at the server's time in microseconds
-- (arrival order, across the set's emptying), and makes the set live at
-- least ms more. Returns the place. (acquire.lua inlines the same.)
local function joinwaiters(waiters, id, place, ms)
  if place == 0 then
    local t = redis.call('time')
    place = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  redis.call('zadd', waiters, string.format('%.0f', place), id) -- every digit
  if redis.call('pttl', waiters) < tonumber(ms) then
    redis.call('pexpire', waiters, ms)
  end
  return place
end

-- A non-fair waiter that has waited longer than starveus (microseconds)
-- when a release wakes it has the free name kept for it, for up to keepms
-- (or until it takes it): no other writer may take it meanwhile. Without
-- this, a woken waiter that keeps finding the name taken again by clients
-- that did not wait (non-fair) may wait indefinitely.
local starveus, keepms = 5000, 100

-- wakewaiters wakes the non-fair waiters the rule would admit now, each by
-- a message naming it, and takes them out of the set: every reader at the
-- head; as many permits as are free; or the writer at the head, if nobody
-- holds (keeping the name for it if it waited too long). A woken waiter
-- that finds the name taken again joins again at the place it had. With
-- no waiter registered, it publishes "" (everyone tries), unless
-- registered says that nobody needs it (release.lua's 'registered'). Call
-- it pruned, with no writer holding.
local function wakewaiters(k, channel, registered)
  local held = redis.call('zcard', k.holds)
  local w = redis.call('zrange', k.waiters, 0, 0, 'WITHSCORES')
  if not w[1] then
    if not registered then redis.call('publish', channel, '') end
    return
  end
  while w[1] do
    local m, limit = kind(w[1], false)
    if (m == 'W' and held > 0) or (m == 'X' and held >= limit) then return end
    redis.call('zrem', k.waiters, w[1])
    if m == 'W' then
      local t = redis.call('time')
      if tonumber(t[1]) * 1000000 + tonumber(t[2]) - tonumber(w[2]) > starveus then
        redis.call('set', k.reserved, w[1], 'PX', keepms)
      end
      redis.call('publish', channel, w[1])
      return
    end
    redis.call('publish', channel, w[1])
    held = held + 1
    w = redis.call('zrange', k.waiters, 0, 0, 'WITHSCORES')
  end
end
