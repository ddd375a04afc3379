-- A reader's or permit's own row, a slot of the name that the transaction
-- checked free: $1 slot key, $2 name, $3 token, $4 acquisition id, $5
-- host, $6 pid, $7 reentrancy owner, $8 expiry, $9 kind, $10 lim, $11 the
-- name row's key.
INSERT INTO {{table}} AS l (lock_key, name, token, owner, host, pid, holder, acquired_at, expires_at, kind, lim, parent)
VALUES ($1, $2, $3, $4, $5, $6, $7, now(), $8, $9, $10, $11)
ON CONFLICT (lock_key) DO UPDATE
SET name = EXCLUDED.name, token = EXCLUDED.token, owner = EXCLUDED.owner, host = EXCLUDED.host, pid = EXCLUDED.pid,
    holder = EXCLUDED.holder, acquired_at = EXCLUDED.acquired_at, expires_at = EXCLUDED.expires_at,
    kind = EXCLUDED.kind, lim = EXCLUDED.lim, parent = EXCLUDED.parent
