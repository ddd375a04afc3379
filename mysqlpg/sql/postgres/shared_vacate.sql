-- Second statement of shared_last.sql's transaction: free the group's
-- row if that statement locked it (the row's xmax is this transaction's
-- id then; with no id assigned, it locked nothing and nothing changes)
-- and still no slot row is live, and wake waiters. Only a statement after
-- the lock sees the slots of joins that committed while it waited: an
-- UPDATE that waited for the lock itself would recheck the name row alone.
-- $1 lock_key, $2 the name's bytes, $3 NOTIFY channel. One row back: whether
-- the group's row was freed.
WITH g AS (
    UPDATE {{table}} n SET expires_at = '-infinity'
    WHERE n.lock_key = $1::bytea AND n.xmax = pg_current_xact_id_if_assigned()::xid
      AND n.owner IS NULL AND n.expires_at > now() AND n.expires_at < 'infinity'
      AND NOT {{include:shared_live_slot}}
    RETURNING n.lock_key, n.waiting_until > now() AS wanted
),
w AS (SELECT pg_notify($3::text, encode(lock_key, 'hex')) FROM g WHERE wanted)
SELECT EXISTS (SELECT 1 FROM g), (SELECT count(*) FROM w)
