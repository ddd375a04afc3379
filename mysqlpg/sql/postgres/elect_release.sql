-- A candidacy's release: lease_release.sql, which also removes the value
-- and always tells the channel $3 (Observe's watch). One row back: rows
-- freed, notifications sent.
WITH r AS (
    UPDATE {{table}}
    SET owner = NULL, host = NULL, pid = NULL, holder = NULL, acquired_at = NULL, expires_at = '-infinity',
        elect = NULL, elect_value = NULL
    WHERE lock_key = $1 AND owner = $2 AND expires_at > now()
    RETURNING lock_key
),
n AS (SELECT pg_notify($3, encode(lock_key, 'hex')) FROM r)
SELECT (SELECT count(*) FROM r), (SELECT count(*) FROM n)
