-- A waiter says that it waits for the name, for the next five seconds, so
-- that its release sends a NOTIFY; it looks at the lock again after this.
-- Back: the name's token, the latest grant's, whose release
-- (advisory_release.sql names the token) a queue's head waits for
-- (queue_pg_advisory.go). No row: the name was never taken.
UPDATE {{table}} SET waiting_until = GREATEST(waiting_until, now() + interval '5 seconds')
WHERE lock_key = $1
RETURNING token
