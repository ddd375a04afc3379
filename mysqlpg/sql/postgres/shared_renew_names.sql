-- Renewing readers and permits, first statement: their groups' rows
-- (locked first, as every reader's and permit's transaction locks them)
-- last at least until $1. {{in:names}} is an array of the name rows' keys.
UPDATE {{table}} SET expires_at = GREATEST(expires_at, $1)
WHERE lock_key = ANY({{in:names}}) AND owner IS NULL AND expires_at > now() AND expires_at < 'infinity'
