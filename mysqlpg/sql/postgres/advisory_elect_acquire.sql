-- A candidacy's acquisition in advisory mode: advisory_acquire.sql, which
-- also marks the row a candidacy (elect, the acquisition id $4) with its
-- value $8 and its session's mark $9 in the same statement, and tells the
-- channel $10 (Observe's watch) when it took the row. One row back:
-- whether the lock was granted, and the token if the row was taken.
WITH l AS (SELECT pg_try_advisory_lock($1) AS got),
i AS (
    INSERT INTO {{table}} AS t (lock_key, name, token, owner, host, pid, holder, acquired_at, expires_at, adv_key,
                                elect, elect_value, adv_mark)
    SELECT $2, $3, 1, $4, $5, $6, $7, now(), 'infinity', $1, $4, $8, $9 FROM l WHERE l.got
    ON CONFLICT (lock_key) DO UPDATE
    SET token = t.token + 1, name = EXCLUDED.name, owner = EXCLUDED.owner, host = EXCLUDED.host,
        pid = EXCLUDED.pid, holder = EXCLUDED.holder, acquired_at = EXCLUDED.acquired_at, expires_at = 'infinity', adv_key = EXCLUDED.adv_key,
        elect = EXCLUDED.elect, elect_value = EXCLUDED.elect_value, adv_mark = EXCLUDED.adv_mark
    WHERE (t.expires_at = 'infinity' AND (t.adv_key IS NULL OR t.adv_key = EXCLUDED.adv_key))
       OR t.expires_at <= now()
    RETURNING token, lock_key
),
n AS (SELECT pg_notify($10, encode(lock_key, 'hex')) FROM i)
SELECT l.got, (SELECT token FROM i) FROM l WHERE (SELECT count(*) FROM n) >= 0
