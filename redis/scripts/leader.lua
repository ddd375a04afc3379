-- leader.lua: the leader of an election, read atomically on the primary.
-- KEYS[1]  lock key
-- KEYS[2]  fencing counter
-- KEYS[3]  values: candidacy ids to their values (elect.lua)
-- Returns {} when nobody holds the name, or its holder is no candidacy (a
-- plain Lock); else {holder id, its value, its token, ms left of its
-- lease}. The holder's token is the counter: only a grant of the lock
-- key moves it while a writer holds.
local id = redis.call('get', KEYS[1])
local pttl = redis.call('pttl', KEYS[1])
if not id or pttl <= 0 then
  return {}
end
local v = redis.call('hget', KEYS[3], id)
if not v then
  return {}
end
return {id, v, tonumber(redis.call('get', KEYS[2]) or '0'), pttl}
