-- Whether the lock table has the columns of readers and permits (kind,
-- lim, slots, parent): one row, 1 or 0.
SELECT COUNT(*) = 4 FROM information_schema.columns
WHERE table_schema = COALESCE(NULLIF(?, ''), DATABASE()) AND table_name = ? AND column_name IN ('kind', 'lim', 'slots', 'parent')
