-- Proclaim: replace the value $1 of the candidacy $3 of the row $2, only
-- while it holds (its lease runs, on the database's clock), and tell the
-- channel $4. The lease (expires_at) is left as it is. One row back: rows
-- changed, notifications sent.
WITH u AS (
    UPDATE {{table}} SET elect_value = $1
    WHERE lock_key = $2 AND owner = $3 AND elect = owner AND expires_at > now() AND expires_at < 'infinity'
    RETURNING lock_key
),
n AS (SELECT pg_notify($4, encode(lock_key, 'hex')) FROM u)
SELECT (SELECT count(*) FROM u), (SELECT count(*) FROM n)
