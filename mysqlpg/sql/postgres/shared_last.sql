-- After a reader's release (shared_leave.sql) committed, first statement
-- of a transaction of its own: lock the name row FOR UPDATE if it is a
-- live group of readers that outlasts its live slots, as this statement
-- sees them, by more than a quarter of the leaving reader's lease ($3, in
-- microseconds): none is live (after the release's commit: of releases at
-- once, the last to commit sees every other), or the reader that left had
-- renewed the group's lease past the others'. Then no join is under way
-- and the next statement (shared_vacate.sql) sees every slot. Otherwise
-- lock nothing: the group's lease is within what a join's grant leaves it.
-- $1 lock_key, $2 the lease in microseconds. The slot rows are read by the
-- parent column's index.
SELECT 1 FROM {{table}} n
WHERE n.lock_key = $1::bytea AND n.owner IS NULL AND n.kind = 'S'
  AND n.expires_at > now() AND n.expires_at < 'infinity'
  AND NOT EXISTS (
      SELECT 1 FROM {{table}} l
      WHERE l.parent = n.lock_key AND l.owner IS NOT NULL AND l.expires_at > now()
        AND l.expires_at >= n.expires_at - ($2::bigint / 4) * interval '1 microsecond')
FOR UPDATE OF n
