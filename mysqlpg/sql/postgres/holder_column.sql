-- Whether the lock table has the holder column (tables made before it
-- existed lack it): one row, true or false.
SELECT EXISTS (SELECT 1 FROM pg_attribute
               WHERE attrelid = to_regclass($1) AND attname = 'holder' AND NOT attisdropped)
