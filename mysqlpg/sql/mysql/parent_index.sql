-- Migration 5: whether the lock table has an index that leads with its
-- parent column, by which the limit rule's check in advisory mode reads a
-- name's readers and permits (advisory_limits.sql,
-- advisory_group_try.sql): one row, 1 or 0.
SELECT COUNT(*) > 0 FROM information_schema.statistics
WHERE table_schema = COALESCE(NULLIF(?, ''), DATABASE()) AND table_name = ? AND column_name = 'parent' AND seq_in_index = 1
