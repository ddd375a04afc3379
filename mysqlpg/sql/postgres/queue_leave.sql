-- Leave a name's queue ($1) once this acquisition ($3) holds the name
-- ($2): the next waiter heads it. One row, true: left; no row: not
-- granted, so still queued.
SELECT pg_advisory_unlock($1::bigint) FROM {{table}}
WHERE lock_key = $2::bytea AND owner = $3::text AND expires_at > now()
