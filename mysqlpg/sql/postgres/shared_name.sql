-- A grant to a reader or permit (or a writer's Share), in the transaction
-- that locked the name row: the row becomes its group's (no owner, the
-- group's kind and limit, expiring with its last hold: never sooner than
-- $4) and the counter moves on by $5 (0 for a Share, which keeps its
-- token). One row back: the token. $1 kind, $2 lim, $3 slots, $6 lock_key.
UPDATE {{table}}
SET token = token + $5, owner = NULL, host = NULL, pid = NULL, holder = NULL, acquired_at = NULL,
    kind = $1, lim = $2, slots = GREATEST(COALESCE(slots, 0), $3),
    expires_at = CASE WHEN expires_at > now() THEN GREATEST(expires_at, $4) ELSE $4 END
WHERE lock_key = $6
RETURNING token
