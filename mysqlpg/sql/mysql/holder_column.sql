-- Whether the lock table has the holder column (tables made before it
-- existed lack it): one row, 1 or 0.
SELECT COUNT(*) > 0 FROM information_schema.columns
WHERE table_schema = COALESCE(NULLIF(?, ''), DATABASE()) AND table_name = ? AND column_name = 'holder'
