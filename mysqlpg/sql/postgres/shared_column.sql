-- Whether the lock table has the columns of readers and permits (kind,
-- lim, slots, parent): one row, true or false.
SELECT count(*) = 4 FROM pg_attribute
WHERE attrelid = to_regclass($1) AND attname IN ('kind', 'lim', 'slots', 'parent') AND NOT attisdropped
