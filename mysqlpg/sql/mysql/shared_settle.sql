-- After a slot was freed (same transaction): the group's row expires with
-- its last live slot, or is free if none is left. The in-list expands to
-- the name's slot keys; the derived table (an aggregate, so the server
-- materializes it) lets the statement read the table it updates.
-- Parameters: the slot keys, lock_key.
UPDATE {{table}}
SET expires_at = COALESCE((SELECT e FROM (
        SELECT MAX(expires_at) AS e FROM {{table}}
        WHERE lock_key IN ({{in:slots}}) AND owner IS NOT NULL AND expires_at > UTC_TIMESTAMP(6)) AS m), '1000-01-01')
WHERE lock_key = ? AND owner IS NULL AND expires_at > UTC_TIMESTAMP(6) AND expires_at < '9999-01-01'
