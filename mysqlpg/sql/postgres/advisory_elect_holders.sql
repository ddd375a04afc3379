-- The candidacies among advisory mode's holds (as advisory_elect_leader.sql,
-- for every name): acquisition id and value.
SELECT t.owner, t.elect_value
FROM {{table}} t
JOIN pg_locks l ON l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
 AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
 AND ((l.classid::bigint << 32) | l.objid::bigint) = t.adv_key
JOIN pg_locks m ON m.locktype = 'advisory' AND m.granted AND m.objsubid = 1
 AND m.database = l.database AND m.pid = l.pid
 AND ((m.classid::bigint << 32) | m.objid::bigint) = t.adv_mark
WHERE t.elect = t.owner AND t.expires_at = 'infinity'
