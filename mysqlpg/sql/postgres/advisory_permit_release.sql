-- A permit's release in advisory mode: release its slot's lock $1 and its
-- gate (the name's lock $4, shared) and, if this session held the slot
-- and someone waits for the name (row $5), wake them on the channel $2
-- with the name's key $3. The slot's row stays (it is not live without
-- its lock). One row back: whether the slot was held, whether the gate
-- was, notifications sent.
WITH u AS (SELECT pg_advisory_unlock($1) AS ok),
g AS (SELECT pg_advisory_unlock_shared($4) AS ok FROM u),
n AS (
    SELECT pg_notify($2, $3) FROM u, {{table}} t
    WHERE u.ok AND t.lock_key = $5 AND t.waiting_until > now()
)
SELECT u.ok, g.ok, (SELECT count(*) FROM n) FROM u, g
