-- After a reader's release (shared_leave.sql) committed, first statement
-- of a transaction of its own: if the name's row is a live group of
-- readers and no slot row is live as this statement sees them (after the
-- release's commit: of releases at once, the last to commit sees every
-- other), lock the row FOR UPDATE, so that no join is under way and the
-- next statement (shared_vacate.sql) sees every slot. Otherwise lock
-- nothing: another reader holds the group, and its release looks again.
-- $1 lock_key, $2 the name's bytes.
SELECT 1 FROM {{table}} n
WHERE n.lock_key = $1::bytea AND n.owner IS NULL AND n.kind = 'S'
  AND n.expires_at > now() AND n.expires_at < 'infinity'
  AND NOT {{include:shared_live_slot}}
FOR UPDATE OF n
