-- The head of a name's queue (queue_pg.go) after its try: if the name is
-- held by another, say that someone waits (so that its release sends a
-- NOTIFY) until a second past the holder's expiry, as lease_wait.sql does.
-- Back: the microseconds the holder's lease has left (-1: the name belongs
-- to advisory mode), the token whose release the head waits for, and the
-- limit of a group of readers (1) or permits that holds the name. No row:
-- free, or held by this acquisition ($2).
UPDATE {{table}}
SET waiting_until = CASE WHEN expires_at = 'infinity' THEN waiting_until
                         ELSE GREATEST(waiting_until, expires_at + interval '1 second') END
WHERE lock_key = $1::bytea AND expires_at > now() AND owner IS DISTINCT FROM $2::text
RETURNING CASE WHEN expires_at = 'infinity' THEN -1
               ELSE GREATEST(0, floor(extract(epoch FROM (expires_at - now())) * 1000000))::bigint END,
          token, CASE WHEN owner IS NULL THEN lim END
