-- Free this acquisition's row and, if someone waits for the name, wake
-- them. A release after expiry matches nothing, so it never frees a newer
-- holder. The notification names the key and the token released: a
-- queue's head (queue_pg.go) waits for the release of the holder it saw,
-- not for an earlier one. One row back: rows freed, notifications sent.
WITH r AS (
    UPDATE {{table}}
    SET owner = NULL, host = NULL, pid = NULL, holder = NULL, acquired_at = NULL, expires_at = '-infinity'
    WHERE lock_key = $1 AND owner = $2 AND expires_at > now()
    RETURNING lock_key, token, waiting_until > now() AS wanted
),
n AS (SELECT pg_notify($3, encode(lock_key, 'hex') || ':' || token) FROM r WHERE wanted)
SELECT (SELECT count(*) FROM r), (SELECT count(*) FROM n)
