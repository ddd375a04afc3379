-- End a cancelled wait in a queue connection's pipeline (queue_pg.go):
-- the connection stays.
SELECT pg_cancel_backend($1::int)
