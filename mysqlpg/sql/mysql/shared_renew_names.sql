-- Renewing readers and permits, first statement: their groups' rows
-- (locked first, as every reader's and permit's transaction locks them)
-- last at least until the given expiry. The in-list expands to the name
-- rows' keys. Parameters: expiry, then the keys.
UPDATE {{table}} SET expires_at = GREATEST(expires_at, CAST(? AS DATETIME(6)))
WHERE lock_key IN ({{in:names}}) AND owner IS NULL AND expires_at > UTC_TIMESTAMP(6) AND expires_at < '9999-01-01'
