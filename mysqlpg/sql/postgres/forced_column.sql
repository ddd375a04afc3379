-- Whether the lock table has the forced and forced_at columns (tables made
-- before they existed lack them): one row, true or false.
SELECT count(*) = 2 FROM pg_attribute
WHERE attrelid = to_regclass($1) AND attname IN ('forced', 'forced_at') AND NOT attisdropped
