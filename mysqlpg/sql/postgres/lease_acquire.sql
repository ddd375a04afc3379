-- One atomic statement: insert the row, or take it over if its lease has
-- expired, bumping the fencing counter. ON CONFLICT locks the row and
-- evaluates WHERE on its latest version, so exactly one of any number of
-- concurrent callers gets a row back. A retry by the same acquisition (its
-- owner id) is granted again, so a statement whose answer was lost can be
-- sent again.
--
-- The queue (queue_pg.go) is the advisory lock $8: its holder heads the
-- name's waiting writers, and a free row goes to the head alone, so that
-- a client that locks again at once cannot pass them by. A session that
-- holds the queue lock (the head, on its queue connection) takes it again
-- at transaction level; anyone else's try only succeeds while nobody
-- holds it, and then holds it until the statement ends. NULL: no queue to
-- respect (a candidacy's upsert, elect_acquire.sql, does not queue).
INSERT INTO {{table}} AS l (lock_key, name, token, owner, host, pid, holder, acquired_at, expires_at)
VALUES ($1, $2, 1, $3, $4, $5, $7, now(), now() + $6 * interval '1 microsecond')
ON CONFLICT (lock_key) DO UPDATE
SET token = l.token + 1, name = EXCLUDED.name, owner = EXCLUDED.owner, host = EXCLUDED.host,
    pid = EXCLUDED.pid, holder = EXCLUDED.holder, acquired_at = EXCLUDED.acquired_at, expires_at = EXCLUDED.expires_at
WHERE CASE WHEN l.expires_at > now() THEN false
           WHEN $8::bigint IS NULL THEN true
           ELSE pg_try_advisory_xact_lock($8::bigint) END
   OR l.owner = EXCLUDED.owner
RETURNING token
