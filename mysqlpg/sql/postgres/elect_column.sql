-- Whether the lock table has the columns of elections (elect,
-- elect_value, adv_mark): one row, true or false.
SELECT count(*) = 3 FROM pg_attribute
WHERE attrelid = to_regclass($1) AND attname IN ('elect', 'elect_value', 'adv_mark') AND NOT attisdropped
