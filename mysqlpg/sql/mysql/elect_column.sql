-- Whether the lock table has the columns of elections (elect,
-- elect_value, adv_mark): one row, 1 or 0.
SELECT COUNT(*) = 3 FROM information_schema.columns
WHERE table_schema = COALESCE(NULLIF(?, ''), DATABASE()) AND table_name = ? AND column_name IN ('elect', 'elect_value', 'adv_mark')
