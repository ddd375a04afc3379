-- A reader's or permit's release on PostgreSQL in one statement, run in
-- the transaction that locked the name row (shared_hold.sql): it frees the
-- slot row that names the acquisition (found among the name's slots, so
-- that a grant whose answer was lost can be released without knowing its
-- slot), makes the group's row expire with its last other live slot (or
-- free, if none is left), and wakes waiters. A release after expiry
-- matches nothing. $1 lock_key, $2 acquisition id, $3 NOTIFY channel.
-- One row back: slots freed, notifications sent. The slot rows are read
-- by the parent column's index.
WITH {{include:shared_free_slot}},
m AS (
    SELECT max(l.expires_at) AS e FROM {{table}} l
    WHERE l.parent = $1::bytea AND l.owner IS NOT NULL AND l.owner <> $2::text AND l.expires_at > now()
),
g AS (
    UPDATE {{table}} SET expires_at = COALESCE((SELECT e FROM m), '-infinity')
    WHERE lock_key = $1::bytea AND owner IS NULL AND expires_at > now() AND expires_at < 'infinity'
      AND EXISTS (SELECT 1 FROM r)
    RETURNING lock_key, waiting_until > now() AS wanted
),
n AS (SELECT pg_notify($3::text, encode(lock_key, 'hex')) FROM g WHERE wanted)
SELECT (SELECT count(*) FROM r), (SELECT count(*) FROM n)
