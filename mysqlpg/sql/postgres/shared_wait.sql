-- A reader or permit that waits says so in the name row (as lease_wait.sql
-- does for a writer), so that a release sends a NOTIFY: until a second
-- past the soonest moment, $2 microseconds from now, that it looks again.
-- $1 lock_key.
UPDATE {{table}} SET waiting_until = GREATEST(waiting_until, now() + $2 * interval '1 microsecond' + interval '1 second')
WHERE lock_key = $1
