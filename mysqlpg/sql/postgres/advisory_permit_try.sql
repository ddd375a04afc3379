-- A permit's try in advisory mode on PostgreSQL, in one statement: take
-- the gate (the name's lock $1 in shared mode, which keeps writers and
-- permits apart); through it, the first free of the candidate slots (the
-- CASE stops at its first granted pg_try_advisory_lock); granted, bump the
-- name row's fencing counter and write the slot's row (kind P) with its
-- token, acquisition id, identity, limit $9 and its session's mark $8 (as
-- advisory_read_acquire.sql does for a reader); with no slot free, give
-- the gate back. {{case:slots}} becomes one arm per candidate k (1-based),
-- "WHEN pg_try_advisory_lock(($10::bigint[])[k]) THEN k": $10 the
-- candidates' slot locks, $11 their rows' keys. $2 name row key, $3 name,
-- $4 acquisition id, $5 host, $6 pid, $7 reentrancy owner. One row back:
-- whether the gate was taken, the candidate granted (0: none), the token
-- if the name row was taken (a row that a lease-mode client holds, or
-- whose advisory key differs, is not: the caller undoes the grant), and
-- whether the gate was given back.
WITH g AS (SELECT pg_try_advisory_lock_shared($1) AS gate),
c AS (SELECT g.gate, CASE WHEN NOT g.gate THEN 0 {{case:slots}} ELSE 0 END AS pos FROM g),
u AS (SELECT pg_advisory_unlock_shared($1) AS ok FROM c WHERE c.gate AND c.pos = 0),
i AS (
    INSERT INTO {{table}} AS t (lock_key, name, token, acquired_at, expires_at, adv_key)
    SELECT $2, $3, 1, now(), 'infinity', $1 FROM c WHERE c.pos > 0
    ON CONFLICT (lock_key) DO UPDATE
    SET token = t.token + 1, name = EXCLUDED.name, expires_at = 'infinity', adv_key = EXCLUDED.adv_key
    WHERE (t.expires_at = 'infinity' AND (t.adv_key IS NULL OR t.adv_key = EXCLUDED.adv_key))
       OR t.expires_at <= now()
    RETURNING token
),
r AS (
    INSERT INTO {{table}} AS t (lock_key, name, token, owner, host, pid, holder, acquired_at, expires_at, adv_key,
                                kind, lim, parent, adv_mark)
    SELECT ($11::bytea[])[c.pos], $3, i.token, $4, $5, $6, $7, now(), 'infinity', ($10::bigint[])[c.pos], 'P', $9, $2, $8
    FROM i, c
    ON CONFLICT (lock_key) DO UPDATE
    SET name = EXCLUDED.name, token = EXCLUDED.token, owner = EXCLUDED.owner, host = EXCLUDED.host,
        pid = EXCLUDED.pid, holder = EXCLUDED.holder, acquired_at = EXCLUDED.acquired_at,
        expires_at = EXCLUDED.expires_at, adv_key = EXCLUDED.adv_key, kind = EXCLUDED.kind, lim = EXCLUDED.lim,
        parent = EXCLUDED.parent, adv_mark = EXCLUDED.adv_mark
    RETURNING 1
)
SELECT c.gate, c.pos, (SELECT token FROM i), COALESCE((SELECT ok FROM u), false)
FROM c WHERE (SELECT count(*) FROM r) >= 0
