-- Free a reader's or permit's slot row, in the transaction that locked
-- its name row. A release after expiry matches nothing. Parameters: slot
-- key, acquisition id.
UPDATE {{table}}
SET owner = NULL, host = NULL, pid = NULL, holder = NULL, acquired_at = NULL, expires_at = '1000-01-01'
WHERE lock_key = ? AND owner = ? AND expires_at > UTC_TIMESTAMP(6)
