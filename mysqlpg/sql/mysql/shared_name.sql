-- A grant to a reader or permit (or a writer's Share), in the transaction
-- that locked the name row: the row becomes its group's (no owner, the
-- group's kind and limit, expiring with its last hold: never sooner than
-- the grant's expiry) and the counter moves on (by 0 for a Share, which
-- keeps its token); the token is read with LAST_INSERT_ID. expires_at is
-- assigned first, from its old value. Parameters: expiry, expiry, kind,
-- lim, slots, counter step, lock_key.
UPDATE {{table}}
SET expires_at = IF(expires_at > UTC_TIMESTAMP(6), GREATEST(expires_at, CAST(? AS DATETIME(6))), CAST(? AS DATETIME(6))),
    owner = NULL, host = NULL, pid = NULL, holder = NULL, acquired_at = NULL,
    kind = ?, lim = ?, slots = GREATEST(COALESCE(slots, 0), ?), token = LAST_INSERT_ID(token + ?)
WHERE lock_key = ?
