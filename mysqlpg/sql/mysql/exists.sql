SELECT COUNT(*) > 0 FROM information_schema.tables
WHERE table_schema = COALESCE(NULLIF(?, ''), DATABASE()) AND table_name = ?
