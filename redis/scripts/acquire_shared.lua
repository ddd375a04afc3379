-- acquire_shared.lua: take a reader's hold or a permit by the grant rule
-- (backends.Mode), or wait in line in fair mode. lib.lua's helpers go
-- in at the line "-- lib.lua".
-- KEYS[1]  lock key (a writer)
-- KEYS[2]  fencing counter (persistent on purpose)
-- KEYS[3]  fair queue
-- KEYS[4]  fair waiters' place deadlines
-- KEYS[5]  readers and permits, scored by lease expiry
-- KEYS[6]  their tokens
-- ARGV[1]  hold id, ending in its kind tag ("/S", "/X<n>") and, in fair
--          mode, ".<lease ms>"
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  '1' to join (or stay in) the queue, '0' for a single try
-- ARGV[4]  waiter lease in milliseconds (fair mode)
-- ARGV[5]  'S' for a reader, 'X' for a permit
-- ARGV[6]  the limit: 1 for a reader, n for a permit of n
-- KEYS[7]  waiters (non-fair mode): hold ids by arrival (see acquire.lua)
-- KEYS[8]  reserved (non-fair mode; see acquire.lua): not read here
-- ARGV[7]  wake-up channel
-- ARGV[8]  '1' when a non-fair caller waits if refused: it joins the
--          waiters, for ARGV[4] milliseconds unrefreshed (absent: fair
--          mode, a single try, or RedLock)
-- ARGV[9]  the caller's place among the waiters from an earlier try, or '0'
-- ARGV[10] the id it waits under, if not ARGV[1] (RedLock; see acquire.lua)
-- Returns what fair_acquire.lua returns: {1, token, 0} when acquired now;
-- {1, token, 1} when it was already (a release granted it to this waiter,
-- or a first run whose answer was lost took it); {0, how long the holders
-- may keep it (ms), queue position, fencing counter} when not; {-1,
-- limit} when the name is held or awaited with another limit; a non-fair
-- waiter refused gets {0, how long, -1, 0, its place}.
-- lib.lua
local k = {lock = KEYS[1], fence = KEYS[2], queue = KEYS[3], deadlines = KEYS[4],
  holds = KEYS[5], tokens = KEYS[6], waiters = KEYS[7], reserved = KEYS[8]}
local id, mode, limit = ARGV[1], ARGV[5], tonumber(ARGV[6])
local wid = ARGV[10] or id
local now = servertime()
local held = prune(k.holds, k.tokens, now)
if redis.call('zscore', k.holds, id) then
  if ARGV[9] and ARGV[9] ~= '0' then
    redis.call('zrem', k.waiters, wid)
  end
  return {1, tonumber(redis.call('zscore', k.tokens, id) or '0'), 1}
end
prunequeue(k.queue, k.deadlines, now)
local other = heldlimit(k.lock, k.holds, k.queue)
if other and other ~= limit then
  return {-1, other}
end

-- The rule: a reader while no writer holds and no writer waits ahead of
-- it; a permit while fewer than its limit hold or wait ahead of it. A
-- single try counts the whole line as ahead.
local writer = redis.call('pttl', k.lock)
local rank = redis.call('zrank', k.queue, id)
local ok = writer == -2 -- no writer holds (-1: a key without expiry, never ours)
if ok and mode == 'S' then
  local last = -1
  if rank then last = rank - 1 end
  if rank ~= 0 then
    for _, w in ipairs(redis.call('zrange', k.queue, 0, last)) do
      if kind(w, false) == 'W' then
        ok = false
        break
      end
    end
  end
elseif ok then
  ok = held + (rank or redis.call('zcard', k.queue)) < limit
end

if ok then
  if rank then
    redis.call('zrem', k.queue, id)
    redis.call('zrem', k.deadlines, id)
  end
  local token = grant(k.holds, k.tokens, k.fence, id, now + tonumber(ARGV[2]))
  if ARGV[9] and ARGV[9] ~= '0' then
    redis.call('zrem', k.waiters, wid)
  end
  if rank then
    handoff(k, ARGV[7], now) -- readers or permits behind it may come too
  end
  settle(k.holds, k.tokens)
  return {1, token, 0}
end
-- How long the holders may keep it: the writer's lease, or the first
-- reader's or permit's to run out; 0 if only waiters are ahead.
local wait = math.max(writer, 0)
local first = redis.call('zrange', k.holds, 0, 0, 'WITHSCORES')[2]
if writer < 0 and first then wait = tonumber(first) - now end
if ARGV[8] == '1' then
  return {0, wait, -1, 0, joinwaiters(k.waiters, wid, tonumber(ARGV[9]), ARGV[4])}
end
if ARGV[3] == '0' then
  return {0, wait, -1, 0}
end
if not rank then
  local last = redis.call('zrange', k.queue, -1, -1, 'WITHSCORES')
  local seq = 1
  if last[2] then seq = tonumber(last[2]) + 1 end
  redis.call('zadd', k.queue, seq, id)
end
redis.call('zadd', k.deadlines, now + tonumber(ARGV[4]), id)
-- The queue lives exactly as long as its longest-lived waiter.
local latest = redis.call('zrange', k.deadlines, -1, -1, 'WITHSCORES')[2]
redis.call('pexpireat', k.queue, latest)
redis.call('pexpireat', k.deadlines, latest)
return {0, wait, redis.call('zrank', k.queue, id), tonumber(redis.call('get', k.fence) or '0')}
