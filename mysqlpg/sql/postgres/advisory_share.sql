-- A writer becoming a reader in advisory mode (Sharer.Share), on its own
-- session: write its reader row $2 (its token $4 unchanged, its
-- acquisition id $5, identity, and the session's mark $9), take the
-- name's lock $1 in shared mode (granted at once: a session never
-- conflicts with itself), then release the exclusive hold, and wake
-- waiters (row $10) on the channel $11 with the name's key $12. One row
-- back: whether the shared lock was taken, whether the exclusive was
-- held. $3 name, $6 host, $7 pid, $8 reentrancy owner.
WITH r AS (
    INSERT INTO {{table}} AS t (lock_key, name, token, owner, host, pid, holder, acquired_at, expires_at, adv_key,
                                kind, lim, parent, adv_mark)
    VALUES ($2, $3, $4, $5, $6, $7, $8, now(), 'infinity', $1, 'S', 1, $10, $9)
    ON CONFLICT (lock_key) DO UPDATE
    SET name = EXCLUDED.name, token = EXCLUDED.token, owner = EXCLUDED.owner, host = EXCLUDED.host,
        pid = EXCLUDED.pid, holder = EXCLUDED.holder, acquired_at = EXCLUDED.acquired_at,
        expires_at = EXCLUDED.expires_at, adv_key = EXCLUDED.adv_key, kind = EXCLUDED.kind, lim = EXCLUDED.lim,
        parent = EXCLUDED.parent, adv_mark = EXCLUDED.adv_mark
    RETURNING 1
),
s AS (SELECT pg_try_advisory_lock_shared($1) AS got FROM (SELECT count(*) FROM r) x),
u AS (SELECT pg_advisory_unlock($1) AS ok FROM s WHERE s.got),
n AS (
    SELECT pg_notify($11, $12) FROM u, {{table}} t
    WHERE u.ok AND t.lock_key = $10 AND t.waiting_until > now()
)
SELECT s.got, COALESCE((SELECT ok FROM u), false) FROM s WHERE (SELECT count(*) FROM n) >= 0
