-- A waiter's look at a held name: how long the lease has left, in
-- microseconds; -1 when the name belongs to advisory mode (its rows never
-- expire). No row: free.
SELECT IF(expires_at = '9999-12-31', -1, GREATEST(0, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at)))
FROM {{table}} WHERE lock_key = ? AND expires_at > UTC_TIMESTAMP(6)
