-- A reader's acquisition in advisory mode: try the name's advisory lock
-- in shared mode ($1) and, only if it was granted, bump the name row's
-- fencing counter (the row is left alone otherwise: its owner is the
-- last writer's, which Holders shows only while a session holds the lock
-- exclusively) and write the reader's own row $4: its token, acquisition
-- id, identity, and its session's mark $9, so that a row whose session
-- died is never taken as live. One round trip, one row back: whether the
-- lock was granted, and the token if the name row was taken (a row that a
-- lease-mode client holds, or whose advisory key differs, is not: the
-- caller unlocks). $2 name row key, $3 name, $5 acquisition id, $6 host,
-- $7 pid, $8 reentrancy owner.
WITH l AS (SELECT pg_try_advisory_lock_shared($1) AS got),
i AS (
    INSERT INTO {{table}} AS t (lock_key, name, token, acquired_at, expires_at, adv_key)
    SELECT $2, $3, 1, now(), 'infinity', $1 FROM l WHERE l.got
    ON CONFLICT (lock_key) DO UPDATE
    SET token = t.token + 1, name = EXCLUDED.name, expires_at = 'infinity', adv_key = EXCLUDED.adv_key
    WHERE (t.expires_at = 'infinity' AND (t.adv_key IS NULL OR t.adv_key = EXCLUDED.adv_key))
       OR t.expires_at <= now()
    RETURNING token
),
r AS (
    INSERT INTO {{table}} AS t (lock_key, name, token, owner, host, pid, holder, acquired_at, expires_at, adv_key,
                                kind, lim, parent, adv_mark)
    SELECT $4, $3, i.token, $5, $6, $7, $8, now(), 'infinity', $1, 'S', 1, $2, $9 FROM i
    ON CONFLICT (lock_key) DO UPDATE
    SET name = EXCLUDED.name, token = EXCLUDED.token, owner = EXCLUDED.owner, host = EXCLUDED.host,
        pid = EXCLUDED.pid, holder = EXCLUDED.holder, acquired_at = EXCLUDED.acquired_at,
        expires_at = EXCLUDED.expires_at, adv_key = EXCLUDED.adv_key, kind = EXCLUDED.kind, lim = EXCLUDED.lim,
        parent = EXCLUDED.parent, adv_mark = EXCLUDED.adv_mark
    RETURNING 1
)
SELECT l.got, (SELECT token FROM i) FROM l WHERE (SELECT count(*) FROM r) >= 0
