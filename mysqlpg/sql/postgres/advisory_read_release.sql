-- A reader's release in advisory mode: drop its row $4 (while it names
-- the acquisition $5), release one shared hold of the name's lock $1 and,
-- if this session held it and someone waits for the name (row $6), wake
-- them on the channel $2 with the name's key $3. One row back: whether it
-- was held, notifications sent.
WITH d AS (DELETE FROM {{table}} WHERE lock_key = $4 AND owner = $5 RETURNING 1),
u AS (SELECT pg_advisory_unlock_shared($1) AS ok FROM (SELECT count(*) FROM d) x),
n AS (
    SELECT pg_notify($2, $3) FROM u, {{table}} t
    WHERE u.ok AND t.lock_key = $6 AND t.waiting_until > now()
)
SELECT u.ok, (SELECT count(*) FROM n) FROM u
