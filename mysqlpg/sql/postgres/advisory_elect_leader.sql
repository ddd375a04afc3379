-- The leader of the election $1 (the name's lock_key) in advisory mode:
-- the row, when it is a candidacy and the session that holds the name's
-- advisory lock now (pg_locks) also holds the mark the row names. A row
-- whose session died, or that the next holder's statement has not yet
-- rewritten, is no leader.
SELECT t.token, t.elect_value
FROM {{table}} t
JOIN pg_locks l ON l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
 AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
 AND ((l.classid::bigint << 32) | l.objid::bigint) = t.adv_key
JOIN pg_locks m ON m.locktype = 'advisory' AND m.granted AND m.objsubid = 1
 AND m.database = l.database AND m.pid = l.pid
 AND ((m.classid::bigint << 32) | m.objid::bigint) = t.adv_mark
WHERE t.lock_key = $1 AND t.elect = t.owner AND t.expires_at = 'infinity'
