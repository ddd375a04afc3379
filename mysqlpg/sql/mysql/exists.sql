-- The table's identity, however the URL spells it: schema (the database)
-- and name as the server stores them. The comparison may ignore case, so
-- the caller prefers an exact match. No row: no such table.
SELECT TABLE_SCHEMA, TABLE_SCHEMA, TABLE_NAME FROM information_schema.tables
WHERE table_schema = COALESCE(NULLIF(?, ''), DATABASE()) AND table_name = ?
