-- A permit's try of one slot in advisory mode, on a session that holds
-- the name's lock $11 shared (the gate that keeps writers out): try the
-- slot's advisory lock $1 and, only if it was granted, bump the name
-- row's fencing counter and write the slot's row $4 (kind P): its token,
-- acquisition id, identity, limit $10 and its session's mark $9, so that
-- a row whose session died is never taken as live, nor its limit. One
-- round trip, one row back: whether the slot was granted, and the token
-- if the name row was taken (see advisory_read_acquire.sql). $2 name row
-- key, $3 name, $5 acquisition id, $6 host, $7 pid, $8 reentrancy owner.
WITH l AS (SELECT pg_try_advisory_lock($1) AS got),
i AS (
    INSERT INTO {{table}} AS t (lock_key, name, token, acquired_at, expires_at, adv_key)
    SELECT $2, $3, 1, now(), 'infinity', $11 FROM l WHERE l.got
    ON CONFLICT (lock_key) DO UPDATE
    SET token = t.token + 1, name = EXCLUDED.name, expires_at = 'infinity', adv_key = EXCLUDED.adv_key
    WHERE (t.expires_at = 'infinity' AND (t.adv_key IS NULL OR t.adv_key = EXCLUDED.adv_key))
       OR t.expires_at <= now()
    RETURNING token
),
r AS (
    INSERT INTO {{table}} AS t (lock_key, name, token, owner, host, pid, holder, acquired_at, expires_at, adv_key,
                                kind, lim, parent, adv_mark)
    SELECT $4, $3, i.token, $5, $6, $7, $8, now(), 'infinity', $1, 'P', $10, $2, $9 FROM i
    ON CONFLICT (lock_key) DO UPDATE
    SET name = EXCLUDED.name, token = EXCLUDED.token, owner = EXCLUDED.owner, host = EXCLUDED.host,
        pid = EXCLUDED.pid, holder = EXCLUDED.holder, acquired_at = EXCLUDED.acquired_at,
        expires_at = EXCLUDED.expires_at, adv_key = EXCLUDED.adv_key, kind = EXCLUDED.kind, lim = EXCLUDED.lim,
        parent = EXCLUDED.parent, adv_mark = EXCLUDED.adv_mark
    RETURNING 1
)
SELECT l.got, (SELECT token FROM i) FROM l WHERE (SELECT count(*) FROM r) >= 0
