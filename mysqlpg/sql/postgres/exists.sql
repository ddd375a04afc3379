-- The table's identity, however the URL spells it: database, schema and
-- name as the server knows them. No row: no such table.
SELECT current_database(), n.nspname, c.relname
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.oid = to_regclass($1)
