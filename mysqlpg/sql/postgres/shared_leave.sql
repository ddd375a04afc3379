-- A reader's release on PostgreSQL, a statement of its own that locks
-- nothing but the reader's slot row: it frees the slot row that names the
-- acquisition (found among the name's slots, so that a grant whose answer
-- was lost can be released without knowing its slot) and wakes waiters;
-- the group's row is left as it is. Readers leave side by side and no
-- longer wait for one another's turn at the row's exclusive lock. The
-- release that empties the group frees its row in a transaction of its
-- own, after this one commits (shared_last.sql, shared_vacate.sql).
-- Tokens stay in order: a join takes its token from the slot rows as its
-- statement's snapshot shows them, and it is granted as of that snapshot
-- (no writer can come between it and its commit while its lease lasts:
-- shared_join.sql). A hold that ended before a reader asked ended
-- before that snapshot, and its token is in it.
-- A release after expiry matches nothing. $1 lock_key, $2 acquisition id,
-- $3 NOTIFY channel. One row back: slots freed, notifications sent.
WITH {{include:shared_free_slot}},
n AS (
    SELECT pg_notify($3::text, encode(lock_key, 'hex')) FROM {{table}}
    WHERE lock_key = $1::bytea AND owner IS NULL AND waiting_until > now() AND EXISTS (SELECT 1 FROM r)
)
SELECT (SELECT count(*) FROM r), (SELECT count(*) FROM n)
