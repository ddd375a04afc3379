-- Renewing readers and permits, second statement: their own slot rows,
-- while they still name their holds, until the given expiry. Affected
-- rows: the holds renewed. Parameters: expiry, keys, owners.
UPDATE {{table}} SET expires_at = CAST(? AS DATETIME(6))
WHERE lock_key IN ({{in:keys}}) AND owner IN ({{in:owners}}) AND expires_at > UTC_TIMESTAMP(6)
