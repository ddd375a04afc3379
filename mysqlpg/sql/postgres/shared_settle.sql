-- After a slot was freed (same transaction): the group's row expires with
-- its last live slot, or is free if none is left, and waiters are woken.
-- $1 lock_key, $2 channel, {{in:slots}} an array of the name's slot keys.
-- One row back: notifications sent.
WITH m AS (
    SELECT max(expires_at) AS e FROM {{table}}
    WHERE lock_key = ANY({{in:slots}}) AND owner IS NOT NULL AND expires_at > now()
),
r AS (
    UPDATE {{table}} SET expires_at = COALESCE((SELECT e FROM m), '-infinity')
    WHERE lock_key = $1 AND owner IS NULL AND expires_at > now() AND expires_at < 'infinity'
    RETURNING lock_key, waiting_until > now() AS wanted
),
n AS (SELECT pg_notify($2, encode(lock_key, 'hex')) FROM r WHERE wanted)
SELECT count(*) FROM n
