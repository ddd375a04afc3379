-- In queue_enter.sql's transaction: microseconds from its start to now,
-- on the database's clock: how long the wait for the queue took.
SELECT floor(extract(epoch FROM clock_timestamp() - now()) * 1000000)::bigint
