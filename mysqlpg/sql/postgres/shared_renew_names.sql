-- Renewing readers and permits, first statement: their groups' rows
-- (locked first, as every reader's and permit's transaction locks them)
-- last at least until $1. {{in:names}} is an array of the name rows' keys.
-- Live means live when the row is read (clock_timestamp()), not when the
-- transaction began (now()): it may have waited for a name row that
-- another transaction held past this lease's expiry, granting its place.
UPDATE {{table}} SET expires_at = GREATEST(expires_at, $1)
WHERE lock_key = ANY({{in:names}}) AND owner IS NULL AND expires_at > clock_timestamp() AND expires_at < 'infinity'
