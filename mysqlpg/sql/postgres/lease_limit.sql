-- After a writer's upsert was refused: the limit of the live group of
-- readers (1) or permits that holds the name, if one does. No row: a
-- writer holds it (limit 1 too).
SELECT lim FROM {{table}}
WHERE lock_key = $1 AND owner IS NULL AND expires_at > now() AND expires_at < 'infinity' AND lim IS NOT NULL
