-- Renew holds of one TTL: each list is one array argument (inArgs), so
-- the statement is prepared once for any batch. Owners are unique per
-- acquisition, so a row matches only for the hold that owns it; lock_key
-- keeps the update on the index.
UPDATE {{table}} SET expires_at = now() + $1 * interval '1 microsecond'
WHERE lock_key = ANY({{in:keys}}) AND owner = ANY({{in:owners}}) AND expires_at > now()
