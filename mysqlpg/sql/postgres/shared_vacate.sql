-- Second statement of shared_last.sql's transaction: if that statement
-- locked the name row (the row's xmax is this transaction's id then; with
-- no id assigned, it locked nothing and nothing changes), make the group's
-- lease end with its last live slot's, or free the name if none is live,
-- and wake waiters when it is free. Only a statement after the lock sees
-- the slots of joins that committed while it waited: an UPDATE that
-- waited for the lock itself would recheck the name row alone.
-- $1 lock_key, $2 NOTIFY channel. One row back: whether the name is free
-- now, and the notifications sent. The slot rows are read by the parent
-- column's index.
WITH g AS (
    UPDATE {{table}} n SET expires_at = COALESCE((
        SELECT max(l.expires_at) FROM {{table}} l
        WHERE l.parent = n.lock_key AND l.owner IS NOT NULL AND l.expires_at > now()
    ), '-infinity')
    WHERE n.lock_key = $1::bytea AND n.xmax = pg_current_xact_id_if_assigned()::xid
      AND n.owner IS NULL AND n.expires_at > now() AND n.expires_at < 'infinity'
    RETURNING n.lock_key, n.expires_at = '-infinity' AS freed, n.waiting_until > now() AS wanted
),
w AS (SELECT pg_notify($2::text, encode(lock_key, 'hex')) FROM g WHERE freed AND wanted)
SELECT EXISTS (SELECT 1 FROM g WHERE freed), (SELECT count(*) FROM w)
