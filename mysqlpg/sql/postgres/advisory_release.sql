-- Unlock and, if this session held the lock and someone waits for the
-- name, wake them, naming the token released (queue_pg_advisory.go's head
-- waits for its holder's release). One row back: whether it was held,
-- notifications sent.
WITH u AS (SELECT pg_advisory_unlock($1) AS ok),
n AS (
    SELECT pg_notify($2, $3 || ':' || t.token) FROM u, {{table}} t
    WHERE u.ok AND t.lock_key = $4 AND t.waiting_until > now()
)
SELECT u.ok, (SELECT count(*) FROM n) FROM u
