-- elect.lua: a candidacy's run of one of the mutex's scripts (acquire.lua,
-- fair_acquire.lua, renew.lua, release.lua or cancel.lua, which goes in at
-- the line "-- body"), keeping the candidacy's value beside its claim in
-- the name's values hash (scripts.go, election.go). A plain Lock never
-- runs this: the mutex's scripts and their arguments are what they were.
-- KEYS     the wrapped script's, then:
-- KEYS[n]  values: a hash of candidacy ids to their values; it expires no
--          sooner than the latest lease or place deadline of its ids
-- ARGV     the wrapped script's, then:
--          the candidacy's value (acquire; '' otherwise)
--          the wake-up channel
--          'acquire', 'renew' or 'release' (release.lua and cancel.lua)
-- Returns what the wrapped script returns.
--
-- acquire: a claim granted now, or a place in the fair queue joined or
-- refreshed, stores the value with it, in the same script, so that the
-- moment the candidacy holds the name its value is there to read (a
-- release that grants it to the head of the queue finds it waiting). A
-- grant is published for Watch (election.go's electMsg, which waiters
-- ignore). renew: the hash lives as long as the lease. release: the
-- value goes with the claim or the place (whether or not it was still
-- there: the field is this hold's own).
local op = table.remove(ARGV)
local channel = table.remove(ARGV)
local value = table.remove(ARGV)
local values = table.remove(KEYS)

-- keep makes the hash live at least ms from now.
local function keep(ms)
  local p = redis.call('pttl', values)
  if p == -1 or (p >= 0 and p < ms) then
    redis.call('pexpire', values, ms)
  end
end

if op == 'release' then
  redis.call('hdel', values, ARGV[1])
end
local function body()
-- body
end
local r = body()
-- (A non-fair waiter, whose try passes its place as ARGV[5], stores its
-- value only once granted: it takes the name itself, and RedLock's rounds
-- each try under a hold id of their own.)
if op == 'acquire' and (r[1] == 1 or (r[1] == 0 and ARGV[3] == '1' and not ARGV[5])) then
  -- Drop the values of ids that neither hold nor wait any more (a lease
  -- or a place that ran out): the hash holds only the live ones.
  local holder = redis.call('get', KEYS[1])
  for _, id in ipairs(redis.call('hkeys', values)) do
    if id ~= ARGV[1] and id ~= holder and not redis.call('zscore', KEYS[3], id)
        and not redis.call('zscore', KEYS[7], id) then
      redis.call('hdel', values, id)
    end
  end
  redis.call('hset', values, ARGV[1], value)
  keep(math.max(tonumber(ARGV[2]), tonumber(ARGV[4] or '0')))
  if r[1] == 1 then
    redis.call('publish', channel, '~elect')
  end
elseif op == 'renew' and r == 1 then
  keep(tonumber(ARGV[2]))
end
return r
