-- The head of a name's queue in advisory mode (queue_pg_advisory.go),
-- before its try: say that someone waits for the next five seconds, as
-- advisory_wait.sql does, and read the name's token: the latest grant's,
-- whose release (advisory_release.sql names the token) the head waits for
-- if its try is refused. No row: the name was never taken.
UPDATE {{table}} SET waiting_until = GREATEST(waiting_until, now() + interval '5 seconds')
WHERE lock_key = $1::bytea
RETURNING token
