-- Every advisory-mode lock held now: the rows whose advisory lock a
-- session holds (from pg_locks), as lease_holders.sql, with the holding
-- session's backend pid (a force release ends that session), then each
-- hold's kind (NULL: a writer), limit, whether it is a reader's or
-- permit's row, and the row's key. A name row counts while a session
-- holds its lock exclusively (readers and permits' gates hold it
-- shared); a reader's row (the name's lock, shared) and a permit's (its
-- slot's lock) while the session that holds it also holds the mark the
-- row names, so a row left by a session that died is no hold. The row
-- names the holder: it is written by the statement that took the lock.
SELECT t.name, t.token, t.owner, t.host, t.pid, t.holder,
       (extract(epoch FROM now() - t.acquired_at) * 1000000)::bigint,
       NULL::bigint,
       l.pid,
       t.kind, t.lim, t.parent IS NOT NULL, t.lock_key
FROM {{table}} t
JOIN pg_locks l ON l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
 AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
 AND ((l.classid::bigint << 32) | l.objid::bigint) = t.adv_key
 AND l.mode = CASE WHEN t.parent IS NOT NULL AND t.kind = 'S' THEN 'ShareLock' ELSE 'ExclusiveLock' END
WHERE t.parent IS NULL
   OR EXISTS (SELECT 1 FROM pg_locks m
              WHERE m.locktype = 'advisory' AND m.granted AND m.objsubid = 1
                AND m.database = l.database AND m.pid = l.pid
                AND ((m.classid::bigint << 32) | m.objid::bigint) = t.adv_mark)
