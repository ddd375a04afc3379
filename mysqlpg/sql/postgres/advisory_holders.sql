-- Every advisory-mode lock held now: the rows whose advisory lock a
-- session holds (from pg_locks), as lease_holders.sql, with the holding
-- session's backend pid last (a force release ends that session). The
-- row names the holder: it is written by the statement that took the lock.
SELECT t.name, t.token, t.owner, t.host, t.pid, t.holder,
       (extract(epoch FROM now() - t.acquired_at) * 1000000)::bigint,
       NULL::bigint,
       l.pid
FROM {{table}} t
JOIN pg_locks l ON l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
 AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
 AND ((l.classid::bigint << 32) | l.objid::bigint) = t.adv_key
