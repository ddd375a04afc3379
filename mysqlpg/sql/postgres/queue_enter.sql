-- Join a name's queue of waiting writers (queue_pg.go): wait for its
-- advisory lock ($1), which the server grants in the order asked, within
-- the session's lock_timeout (queue_timeout.sql). Not while a group of
-- permits whose limit is not 1 holds the name ($2, its row key): that
-- writer is refused (no row back), and learns why from queue_mark.sql.
SELECT pg_advisory_lock($1::bigint)
WHERE NOT EXISTS (
    SELECT 1 FROM {{table}}
    WHERE lock_key = $2::bytea AND owner IS NULL AND expires_at > now() AND expires_at < 'infinity'
      AND lim IS NOT NULL AND lim <> 1
)
