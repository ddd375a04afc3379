-- Whether the lock table has the forced and forced_at columns (tables made
-- before they existed lack them): one row, 1 or 0.
SELECT COUNT(*) = 2 FROM information_schema.columns
WHERE table_schema = COALESCE(NULLIF(?, ''), DATABASE()) AND table_name = ? AND column_name IN ('forced', 'forced_at')
