-- Renew holds of one TTL: the two in-lists expand to one
-- placeholder per hold. Owners are unique per acquisition, so a row matches
-- only for the hold that owns it; lock_key keeps the update on the index.
UPDATE {{table}} SET expires_at = now() + $1 * interval '1 microsecond'
WHERE lock_key IN ({{in:keys}}) AND owner IN ({{in:owners}}) AND expires_at > now()
