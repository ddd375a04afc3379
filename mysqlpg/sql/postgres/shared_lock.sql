-- Lock the name row for a reader's or permit's transaction and read it:
-- owner (a writer's id, or NULL), live, advisory (one table serves one
-- mode), kind and lim (of a live group of readers or permits), slots,
-- microseconds left, and the expiry a lease of $1 microseconds granted
-- now gets (every statement of the transaction uses that one value).
-- $2 lock_key.
SELECT owner, expires_at > now(), expires_at = 'infinity', kind, lim, COALESCE(slots, 0),
       CASE WHEN expires_at > now() AND expires_at < 'infinity'
            THEN floor(extract(epoch FROM (expires_at - now())) * 1000000)::bigint ELSE 0 END,
       now() + $1 * interval '1 microsecond'
FROM {{table}} WHERE lock_key = $2 FOR UPDATE
