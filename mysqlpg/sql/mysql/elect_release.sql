-- A candidacy's release: lease_release.sql, which also removes the value.
UPDATE {{table}}
SET owner = NULL, host = NULL, pid = NULL, holder = NULL, acquired_at = NULL, expires_at = '1000-01-01',
    elect = NULL, elect_value = NULL
WHERE lock_key = ? AND owner = ? AND expires_at > UTC_TIMESTAMP(6)
