-- Renewing readers and permits, second statement: their own slot rows,
-- while they still name their holds, until $1. Affected rows: the holds
-- renewed.
-- Live means live when the row is read (clock_timestamp()), not when the
-- transaction began (now()): it may have waited for a name row that
-- another transaction held past this lease's expiry, granting its place.
UPDATE {{table}} SET expires_at = $1
WHERE lock_key = ANY({{in:keys}}) AND owner = ANY({{in:owners}}) AND expires_at > clock_timestamp()
