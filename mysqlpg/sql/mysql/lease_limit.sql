-- After a writer's upsert was refused: the limit of the live group of
-- readers (1) or permits that holds the name, if one does. No row: a
-- writer holds it (limit 1 too).
SELECT lim FROM {{table}}
WHERE lock_key = ? AND owner IS NULL AND expires_at > UTC_TIMESTAMP(6) AND expires_at < '9999-01-01' AND lim IS NOT NULL
