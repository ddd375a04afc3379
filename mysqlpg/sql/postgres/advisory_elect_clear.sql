-- After a forced release in advisory mode ended the holding session:
-- remove the value of the candidacy $2 from the row $1 (while the row
-- still names it), and tell the channel $3. One row back: rows changed,
-- notifications sent.
WITH c AS (
    UPDATE {{table}} SET elect = NULL, elect_value = NULL, adv_mark = NULL
    WHERE lock_key = $1 AND owner = $2 AND elect = owner
    RETURNING lock_key
),
n AS (SELECT pg_notify($3, encode(lock_key, 'hex')) FROM c)
SELECT (SELECT count(*) FROM c), (SELECT count(*) FROM n)
