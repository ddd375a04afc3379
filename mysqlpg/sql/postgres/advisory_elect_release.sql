-- A candidacy's release in advisory mode: remove its value from the row
-- (while the row names it, $5), unlock, and tell the channel $2 with the
-- name's key $3 (Observe's watch). One row back: whether it was held,
-- notifications sent.
WITH c AS (
    UPDATE {{table}} SET elect = NULL, elect_value = NULL, adv_mark = NULL
    WHERE lock_key = $4 AND owner = $5 AND elect = owner
    RETURNING 1
),
u AS (SELECT pg_advisory_unlock($1) AS ok FROM (SELECT count(*) FROM c) x),
n AS (SELECT pg_notify($2, $3) FROM u WHERE u.ok)
SELECT u.ok, (SELECT count(*) FROM n) FROM u
