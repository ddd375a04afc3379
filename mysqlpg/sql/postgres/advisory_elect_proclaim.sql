-- Proclaim in advisory mode, on the candidacy's own session: replace the
-- value $1 of the candidacy $3 of the row $2, only while this session
-- holds the name's advisory lock, and tell the channel $4. One row back:
-- rows changed, notifications sent.
WITH u AS (
    UPDATE {{table}} t SET elect_value = $1
    WHERE t.lock_key = $2 AND t.owner = $3 AND t.elect = t.owner AND t.expires_at = 'infinity'
      AND EXISTS (SELECT 1 FROM pg_locks l
                  WHERE l.pid = pg_backend_pid() AND l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
                    AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                    AND ((l.classid::bigint << 32) | l.objid::bigint) = t.adv_key)
    RETURNING t.lock_key
),
n AS (SELECT pg_notify($4, encode(lock_key, 'hex')) FROM u)
SELECT (SELECT count(*) FROM u), (SELECT count(*) FROM n)
