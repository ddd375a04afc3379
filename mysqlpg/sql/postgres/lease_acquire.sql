-- One atomic statement: insert the row, or take it over if its lease has
-- expired, bumping the fencing counter. ON CONFLICT locks the row and
-- evaluates WHERE on its latest version, so exactly one of any number of
-- concurrent callers gets a row back. A retry by the same acquisition (its
-- owner id) is granted again, so a statement whose answer was lost can be
-- sent again.
INSERT INTO {{table}} AS l (lock_key, name, token, owner, host, pid, holder, acquired_at, expires_at)
VALUES ($1, $2, 1, $3, $4, $5, $7, now(), now() + $6 * interval '1 microsecond')
ON CONFLICT (lock_key) DO UPDATE
SET token = l.token + 1, name = EXCLUDED.name, owner = EXCLUDED.owner, host = EXCLUDED.host,
    pid = EXCLUDED.pid, holder = EXCLUDED.holder, acquired_at = EXCLUDED.acquired_at, expires_at = EXCLUDED.expires_at
WHERE l.expires_at <= now() OR l.owner = EXCLUDED.owner
RETURNING token
