-- Free a reader's or permit's slot row, in the transaction that locked
-- its name row. A release after expiry matches nothing. $1 slot key, $2
-- acquisition id.
UPDATE {{table}}
SET owner = NULL, host = NULL, pid = NULL, holder = NULL, acquired_at = NULL, expires_at = '-infinity'
WHERE lock_key = $1 AND owner = $2 AND expires_at > now()
