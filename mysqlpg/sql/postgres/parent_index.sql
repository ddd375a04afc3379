-- Migration 5: whether the lock table has an index that leads with its
-- parent column, by which the limit rule's check in advisory mode reads a
-- name's readers and permits (advisory_limits.sql): one row, true or
-- false.
SELECT EXISTS (
    SELECT 1 FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
    WHERE i.indrelid = to_regclass($1) AND a.attname = 'parent'
)
