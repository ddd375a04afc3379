-- Lock the name row for a reader's or permit's transaction and read it:
-- owner (a writer's id, or NULL), live, advisory (one table serves one
-- mode), kind and lim (of a live group of readers or permits), slots,
-- microseconds left, and the expiry a lease of the given microseconds
-- granted now gets (every statement of the transaction uses that one
-- value). Parameters: TTL in microseconds, lock_key.
SELECT owner, expires_at > UTC_TIMESTAMP(6), expires_at = '9999-12-31', kind, lim, COALESCE(slots, 0),
       IF(expires_at > UTC_TIMESTAMP(6) AND expires_at < '9999-01-01', TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at), 0),
       CAST(UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND AS CHAR)
FROM {{table}} WHERE lock_key = ? FOR UPDATE
