-- Try the advisory lock and, only if it was granted, bump the name's
-- fencing counter and record the holder: one round trip, one row back:
-- whether the lock was granted, and the token if the row was taken. A row
-- that a lease-mode client holds on the same table is left alone (granted,
-- but no token: the caller unlocks): one table serves one mode. So is a
-- row whose advisory key differs from this client's (a bug, never a grant).
--
-- $8 is the name's queue lock (queue_pg_advisory.go): while another session
-- holds it (the queue's head, on its queue connection), the name is not
-- taken; the check holds the queue lock to the statement's end. NULL: the
-- head's try, which skips the check.
WITH l AS (SELECT CASE WHEN $8::bigint IS NULL THEN pg_try_advisory_lock($1)
                       WHEN pg_try_advisory_xact_lock($8::bigint) THEN pg_try_advisory_lock($1)
                       ELSE false END AS got),
i AS (
    INSERT INTO {{table}} AS t (lock_key, name, token, owner, host, pid, holder, acquired_at, expires_at, adv_key)
    SELECT $2, $3, 1, $4, $5, $6, $7, now(), 'infinity', $1 FROM l WHERE l.got
    ON CONFLICT (lock_key) DO UPDATE
    SET token = t.token + 1, name = EXCLUDED.name, owner = EXCLUDED.owner, host = EXCLUDED.host,
        pid = EXCLUDED.pid, holder = EXCLUDED.holder, acquired_at = EXCLUDED.acquired_at, expires_at = 'infinity', adv_key = EXCLUDED.adv_key
    WHERE (t.expires_at = 'infinity' AND (t.adv_key IS NULL OR t.adv_key = EXCLUDED.adv_key))
       OR t.expires_at <= now()
    RETURNING token
)
SELECT l.got, (SELECT token FROM i) FROM l
