-- A waiter's look at a held name: say that someone waits (so that the
-- release sends a NOTIFY) until a second past the holder's expiry, by which
-- time the waiter looks again, and read how long the lease has left in
-- microseconds: -1 when the name belongs to advisory mode. No row: free.
-- The release locks the same row, so either it sees the interest or this
-- sees the name free: no wake-up is lost.
UPDATE {{table}}
SET waiting_until = CASE WHEN expires_at = 'infinity' THEN waiting_until
                         ELSE GREATEST(waiting_until, expires_at + interval '1 second') END
WHERE lock_key = $1 AND expires_at > now()
RETURNING CASE WHEN expires_at = 'infinity' THEN -1
               ELSE GREATEST(0, floor(extract(epoch FROM (expires_at - now())) * 1000000))::bigint END
