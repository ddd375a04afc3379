-- A candidacy's acquisition: lease_acquire.sql, which also marks the row a
-- candidacy (elect, the acquisition id $3) with its value $8, in the same
-- statement as the grant, and tells the channel $9 (Observe's watch) when
-- it granted. Row back: the token; none: not granted.
WITH g AS (
    INSERT INTO {{table}} AS l (lock_key, name, token, owner, host, pid, holder, acquired_at, expires_at, elect, elect_value)
    VALUES ($1, $2, 1, $3, $4, $5, $7, now(), now() + $6 * interval '1 microsecond', $3, $8)
    ON CONFLICT (lock_key) DO UPDATE
    SET token = l.token + 1, name = EXCLUDED.name, owner = EXCLUDED.owner, host = EXCLUDED.host,
        pid = EXCLUDED.pid, holder = EXCLUDED.holder, acquired_at = EXCLUDED.acquired_at, expires_at = EXCLUDED.expires_at,
        elect = EXCLUDED.elect, elect_value = EXCLUDED.elect_value
    WHERE l.expires_at <= now() OR l.owner = EXCLUDED.owner
    RETURNING token, lock_key
),
n AS (SELECT pg_notify($9, encode(lock_key, 'hex')) FROM g)
SELECT token FROM g WHERE (SELECT count(*) FROM n) >= 0
