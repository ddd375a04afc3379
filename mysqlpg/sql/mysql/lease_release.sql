-- Free this acquisition's row. A release after expiry matches nothing, so
-- it never frees a newer holder.
UPDATE {{table}}
SET owner = NULL, host = NULL, pid = NULL, holder = NULL, acquired_at = NULL, expires_at = '1000-01-01'
WHERE lock_key = ? AND owner = ? AND expires_at > UTC_TIMESTAMP(6)
