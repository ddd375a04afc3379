-- Renewing readers and permits, second statement: their own slot rows,
-- while they still name their holds, until $1. Affected rows: the holds
-- renewed.
UPDATE {{table}} SET expires_at = $1
WHERE lock_key = ANY({{in:keys}}) AND owner = ANY({{in:owners}}) AND expires_at > now()
